/** The `@anthropic-ai/sdk` module. */
export type AnthropicSdk = typeof import('@anthropic-ai/sdk');

let sdkModule: AnthropicSdk | undefined;

/**
 * @internal
 * Loads `@anthropic-ai/sdk` on first use, so the package is needed only by servers that use
 * this provider. Throws one clear line when it is missing.
 */
export function loadAnthropicSdk(): AnthropicSdk {
  if (sdkModule) return sdkModule;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    sdkModule = require('@anthropic-ai/sdk') as AnthropicSdk;
  } catch (error) {
    const missing =
      (error as { code?: string })?.code === 'MODULE_NOT_FOUND' &&
      String((error as Error).message).includes("'@anthropic-ai/sdk'");
    const detail = String((error as Error)?.message ?? error).split('\n')[0];
    throw new Error(
      missing
        ? 'The Anthropic provider needs the @anthropic-ai/sdk package: run "npm install @anthropic-ai/sdk"'
        : `The @anthropic-ai/sdk package failed to load (${detail}): reinstall it with "npm install @anthropic-ai/sdk"`,
      { cause: error },
    );
  }
  return sdkModule;
}
