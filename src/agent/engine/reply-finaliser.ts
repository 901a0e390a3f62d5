import { WellKnownMetadataKeys as K, type ReplyBeforeContext } from '../../contracts';
import { fitCall } from './context-fit';
import { callModel } from './model-step';
import { recordCall, throwIfAborted, type FinalAnswer } from './step-loop';
import type { TurnDeps } from './turn-deps';
import type { TurnState } from './turn-state';

/** The reply as finalised by `agent:reply:before`. */
export interface FinalReply {
  /** What is sent to the session; empty = silent. */
  visible: string;
  /** What is persisted. */
  stored: string;
  /** Decoded visible text of a structured-output envelope, when it differs from `stored`. */
  visibleContent?: string;
}

const DEFAULT_RETRY_FEEDBACK =
  'Your previous answer did not have the required format. Answer again, following the format described in the system prompt.';

/**
 * Runs `agent:reply:before` and its retry protocol: a middleware may set `retryRequested` (with
 * `retryFeedback` and `maxRetries`); the model is called again without tools, each retry being
 * a model call with its own `token:usage` (U1) and no insertions (I2). When retries run out and
 * a retry is still requested, the content is emptied so nothing unvalidated goes out. In rooms,
 * drafts discarded by a retry are persisted with `sent: false` (P2).
 */
export async function finaliseReply(
  deps: TurnDeps,
  state: TurnState,
  final: FinalAnswer,
): Promise<FinalReply> {
  let raw = final.response.content ?? '';
  const ctx: ReplyBeforeContext = {
    content: raw,
    sessionId: state.sessionId,
    turnId: state.turn.id,
    platform: state.platform,
    inputs: state.turn.inputs,
    attempt: 0,
    maxRetries: 0,
  };
  await deps.hooks.run('agent:reply:before', ctx);
  while (ctx.retryRequested && ctx.attempt < Math.max(0, ctx.maxRetries) && raw.trim()) {
    throwIfAborted(state);
    if (state.isRoom) await persistDraft(deps, state, raw);
    const scaffold = [
      ...final.sent.messages,
      { role: 'assistant' as const, content: raw },
      { role: 'system' as const, content: ctx.retryFeedback || DEFAULT_RETRY_FEEDBACK },
    ];
    // Retries trim too, into a copy; their scaffolding never counts as history (I15).
    const fitted = fitCall(deps, state, scaffold, [], false);
    const response = await callModel(deps, state, fitted.messages, []);
    recordCall(deps, state, { ...fitted, tools: [] }, response);
    raw = response.content ?? '';
    Object.assign(ctx, {
      content: raw,
      archiveContent: undefined,
      visibleContent: undefined,
      retryRequested: false,
      retryFeedback: undefined,
      attempt: ctx.attempt + 1,
    });
    await deps.hooks.run('agent:reply:before', ctx);
  }
  if (ctx.retryRequested) ctx.content = '';
  const stored = ctx.archiveContent ?? ctx.content;
  const visibleContent =
    ctx.visibleContent && ctx.visibleContent !== stored ? ctx.visibleContent : undefined;
  return { visible: ctx.content, stored, visibleContent };
}

async function persistDraft(deps: TurnDeps, state: TurnState, content: string): Promise<void> {
  await deps.archive.append([
    {
      sessionId: state.sessionId,
      role: 'assistant',
      content,
      metadata: { [K.TurnId]: state.turn.id, [K.Sent]: false },
    },
  ]);
  state.persistedAny = true;
}
