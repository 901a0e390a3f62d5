import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium (`apt-get install chromium`; `.ci/run` installs it when missing). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Flags that keep the browser off the network and quiet: no sandbox (containers, root), no
 * GPU, no background, component-update, sync or first-run traffic, no QUIC.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/** Whether the browser is installed. */
export function chromiumInstalled(): boolean {
  return existsSync(CHROMIUM_PATH);
}

/** The error of a browser test run without the browser. */
export function missingChromiumMessage(): string {
  return (
    `Chromium is not installed at ${CHROMIUM_PATH}: the dashboard's browser tests need it ` +
    '(apt-get install chromium; .ci/run installs it when NEEDED_SERVICES lists chromium)'
  );
}

/**
 * A headless chromium driven by `playwright-core`, with a fresh profile in a temporary
 * directory (removed on close). Pages share the profile; each page has its own
 * `sessionStorage`, as browser tabs do.
 */
export class TestBrowser {
  private readonly pages = new Set<Page>();

  private constructor(
    readonly context: BrowserContext,
    private readonly profileDir: string,
  ) {}

  /** Launches the browser; throws {@link missingChromiumMessage} when it is not installed. */
  static async launch(
    options: { viewport?: { width: number; height: number } } = {},
  ): Promise<TestBrowser> {
    if (!chromiumInstalled()) throw new Error(missingChromiumMessage());
    const profileDir = mkdtempSync(join(tmpdir(), 'dashboard-chromium-'));
    try {
      // Playwright passes the profile as --user-data-dir itself (it refuses the flag in args).
      const context = await chromium.launchPersistentContext(profileDir, {
        executablePath: CHROMIUM_PATH,
        headless: true,
        args: [...CHROMIUM_ARGS],
        viewport: options.viewport ?? { width: 1280, height: 800 },
        timeout: 60_000,
      });
      return new TestBrowser(context, profileDir);
    } catch (error) {
      rmSync(profileDir, { recursive: true, force: true });
      throw error;
    }
  }

  /** A new tab; closed by {@link close} when the test does not close it. */
  async newPage(): Promise<Page> {
    const page = await this.context.newPage();
    this.pages.add(page);
    page.once('close', () => this.pages.delete(page));
    return page;
  }

  /** Closes the tabs and the browser, and removes the profile. */
  async close(): Promise<void> {
    try {
      for (const page of [...this.pages]) await page.close().catch(() => undefined);
      await this.context.close();
    } finally {
      rmSync(this.profileDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
    }
  }
}
