import { extendArrayMetadata } from '@nestjs/common/utils/extend-metadata.util';
import type { ContributionOutput, PromptContributionSpec, PromptView } from './prompt.types';

/** Metadata key of `@PromptContribution`. */
export const PROMPT_CONTRIBUTION_METADATA = 'agent:prompt_contribution_metadata';

/** What `@PromptContribution` records: the spec without `build` (the method is `build`). */
export type PromptContributionMetadata = Omit<PromptContributionSpec, 'build'>;

type BuildMethod = (view: PromptView) => ContributionOutput | Promise<ContributionOutput>;

/**
 * Declares a provider method as the `build(view)` of an `agent:prompt` contribution (R1-R3).
 * Discovered at bootstrap; the global key is `<module name>/<key>`.
 */
export function PromptContribution(
  spec: PromptContributionMetadata,
): <T extends BuildMethod>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => TypedPropertyDescriptor<T> {
  return (_target, _key, descriptor) => {
    extendArrayMetadata(
      PROMPT_CONTRIBUTION_METADATA,
      [spec],
      descriptor.value as unknown as (...args: unknown[]) => unknown,
    );
    return descriptor;
  };
}
PromptContribution.KEY = PROMPT_CONTRIBUTION_METADATA;
