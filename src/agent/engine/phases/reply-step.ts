import {
  WellKnownMetadataKeys,
  type ModelMessage,
  type ReplyBeforeContext,
} from '../../../contracts';
import type { EnginePorts } from '../ports';
import type { FinalReply, TurnState } from '../turn-state';

/** Read once: a re-exported binding is a getter call on every access. */
const K = WellKnownMetadataKeys;

/** What the reply step decided: a reply, or another model call with this scaffold. */
export type ReplyDecision =
  { kind: 'final'; reply: FinalReply } | { kind: 'retry'; scaffold: ModelMessage[]; draft: string };

const DEFAULT_RETRY_FEEDBACK =
  'Your previous answer did not have the required format. Answer again, following the format described in the system prompt.';

/** The `agent:reply:before` context of a turn's first answer. */
export function replyContext(state: TurnState, content: string): ReplyBeforeContext {
  return {
    content,
    sessionId: state.sessionId,
    turnId: state.turn.id,
    platform: state.platform,
    inputs: state.turn.inputs,
    attempt: 0,
    maxRetries: 0,
  };
}

/**
 * Runs `agent:reply:before` on the model's answer `raw` (`sent`: what its call was sent) and
 * decides: a middleware may set `retryRequested` (with `retryFeedback` and `maxRetries`); while
 * retries are left the model is to be asked again with the answer and the feedback. When retries
 * run out and a retry is still requested, the content is emptied so nothing unvalidated goes out.
 */
export async function reviewReply(
  ports: Pick<EnginePorts, 'hooks'>,
  ctx: ReplyBeforeContext,
  raw: string,
  sent: readonly ModelMessage[],
): Promise<ReplyDecision> {
  await ports.hooks.run('agent:reply:before', ctx);
  if (ctx.retryRequested && ctx.attempt < Math.max(0, ctx.maxRetries) && raw.trim()) {
    const scaffold: ModelMessage[] = [
      ...sent,
      { role: 'assistant', content: raw },
      { role: 'system', content: ctx.retryFeedback || DEFAULT_RETRY_FEEDBACK },
    ];
    return { kind: 'retry', scaffold, draft: raw };
  }
  if (ctx.retryRequested) ctx.content = '';
  const stored = ctx.archiveContent ?? ctx.content;
  const visibleContent =
    ctx.visibleContent && ctx.visibleContent !== stored ? ctx.visibleContent : undefined;
  return { kind: 'final', reply: { visible: ctx.content, stored, visibleContent } };
}

/** Resets the context for the answer of the next attempt. */
export function nextAttempt(ctx: ReplyBeforeContext, content: string): void {
  Object.assign(ctx, {
    content,
    archiveContent: undefined,
    visibleContent: undefined,
    retryRequested: false,
    retryFeedback: undefined,
    attempt: ctx.attempt + 1,
  });
}

/** P2: in rooms, a draft discarded by a retry is persisted with `sent: false`. */
export async function persistDraft(
  ports: Pick<EnginePorts, 'archive'>,
  state: TurnState,
  content: string,
): Promise<void> {
  await ports.archive.append([
    {
      sessionId: state.sessionId,
      role: 'assistant',
      content,
      metadata: { [K.TurnId]: state.turn.id, [K.Sent]: false },
    },
  ]);
  state.persistedAny = true;
}
