/**
 * `describe` for a suite that needs something outside the repository (a server, a binary).
 * When `missing` says what is absent: outside CI the suite is skipped with a title that says
 * so; with `CI` set it is one failing test named `<requirement> (required in CI)` (never a
 * silent skip in CI).
 */
export function describeNeeding(
  title: string,
  missing: string | undefined,
  requirement: string,
  suite: () => void,
): void {
  if (!missing) {
    describe(title, suite);
  } else if (process.env.CI) {
    describe(title, () => {
      it(`${requirement} (required in CI)`, () => {
        throw new Error(`${missing} (CI is set: this is a failure)`);
      });
    });
  } else {
    describe.skip(`${title} (skipped: ${missing})`, suite);
  }
}
