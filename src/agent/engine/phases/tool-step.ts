import { newId } from '../../../contracts';
import {
  WellKnownMetadataKeys,
  type ContentSegment,
  type ModelMessage,
  type NewMessage,
  type ToolAfterContext,
  type ToolBeforeContext,
  type ToolCall,
  type ToolCallContext,
  type ToolExecuteEvent,
  normaliseText,
} from '../../../contracts';
import { toolError, type ToolResult } from '../../tools';
import type { EnginePorts } from '../ports';
import { approvalGate } from '../tool-approval';
import type { TurnState } from '../turn-state';

/** Read once: a re-exported binding is a getter call on every access. */
const K = WellKnownMetadataKeys;

/** What running tool calls uses. */
export type ToolStepPorts = Pick<
  EnginePorts,
  | 'hooks'
  | 'events'
  | 'tools'
  | 'archive'
  | 'estimator'
  | 'instrumentation'
  | 'approvals'
  | 'options'
>;

/** One executed call: what goes back to the model and what is persisted. */
interface ExecutedCall {
  call: ToolCall;
  callId: string;
  result: string;
  metadata: Record<string, unknown>;
  segment: ContentSegment;
  /** Images of the result, for a model that accepts them (never persisted). */
  images?: string[];
}

/**
 * Runs the tool calls of one model answer in parallel and persists the group (the assistant
 * message with its calls and one result per call, in call order) atomically with the turn id
 * and each call's `callId` (P1). Unknown tools, invalid arguments, thrown errors and timeouts
 * become results that say so. Returns the messages to append to the working list.
 */
export async function runToolCalls(
  deps: ToolStepPorts,
  state: TurnState,
  assistant: { content: string; reasoningContent?: string; toolCalls: ToolCall[] },
  /** Names of the tools the call offered; a call of any other tool gets the unknown-tool result. */
  offered?: ReadonlySet<string>,
): Promise<ModelMessage[]> {
  state.toolCalls += assistant.toolCalls.length;
  const executed = await Promise.all(
    assistant.toolCalls.map((call) => runOne(deps, state, call, offered)),
  );
  // The timeline gets the calls in call order, each with its callId (P1).
  for (const e of executed) state.segments.push(e.segment);
  const turnId = state.turn.id;
  const assistantMeta: Record<string, unknown> = { [K.TurnId]: turnId };
  if (state.isRoom && assistant.content.trim()) assistantMeta[K.Sent] = false;
  const { sessionId } = state;
  const { content, toolCalls, reasoningContent } = assistant;
  // Literals without spreads (a spread builds the whole object the slow way); a field that is
  // seldom there is set after the literal.
  const head: NewMessage = {
    sessionId,
    role: 'assistant',
    content,
    toolCalls,
    metadata: assistantMeta,
  };
  const headModel: ModelMessage = { role: 'assistant', content, toolCalls, metadata: { turnId } };
  if (reasoningContent) head.reasoningContent = headModel.reasoningContent = reasoningContent;
  const group: NewMessage[] = [head];
  const models: ModelMessage[] = [headModel];
  for (const e of executed) {
    const metadata = { ...e.metadata, [K.TurnId]: turnId, [K.CallId]: e.callId };
    const toolCallId = e.call.id;
    const result = e.result;
    group.push({ sessionId, role: 'tool', content: result, toolCallId, metadata });
    models.push(
      toolCallId
        ? { role: 'tool', content: result, toolCallId, metadata: { turnId } }
        : { role: 'tool', content: result, metadata: { turnId } },
    );
  }
  const shown = state.acceptsImages ? imagesMessage(executed, turnId) : undefined;
  if (shown) models.push(shown);
  const stamping = state.stampCounts(deps.estimator, models);
  if (stamping) await stamping;
  group.forEach((m, i) => {
    const count = state.countFor(deps.estimator, models[i]);
    if (count) m.metadata[K.TokenCount] = count;
  });
  await deps.archive.append(group);
  state.persistedAny = true;
  state.historyAdded += group.length;
  return models;
}

async function runOne(
  deps: ToolStepPorts,
  state: TurnState,
  call: ToolCall,
  offered: ReadonlySet<string> | undefined,
): Promise<ExecutedCall> {
  const callId = newId();
  const startTime = Date.now();
  const context = toolContext(state, callId);
  const parsed = parseArguments(call.function.arguments);
  const before: ToolBeforeContext = {
    name: call.function.name,
    args: parsed.args,
    toolCallContext: context,
  };
  // tool:before may rewrite name/args or refuse (not call next); invalid arguments never run.
  const reached = parsed.error ? false : await deps.hooks.run('agent:tool:before', before);
  announce(deps, state, callId, before);
  const refusal = refusalOf(parsed.error, reached, offered, before.name);
  // A call that needs a person's approval waits here (issue 20); denied, it does not run.
  const gating = refusal ? {} : approvalGate(deps, state.turn, before, context);
  const gate = gating instanceof Promise ? await gating : gating;
  const outcome = refusal ?? gate.denied ?? (await execute(deps, before, context));
  const after: ToolAfterContext = {
    name: before.name,
    args: before.args,
    // The text policy of every store, so the model's next call sees what history keeps.
    result: normaliseText(outcome.content),
    ok: outcome.ok,
    toolCallContext: context,
    metadata: gate.record ? { [K.Approval]: gate.record } : {},
  };
  await deps.hooks.run('agent:tool:after', after);
  announce(deps, state, callId, before, after);
  const { name, args, ok, result } = after;
  const segment: ContentSegment = {
    type: 'tool_call',
    callId,
    name,
    args,
    result,
    ok,
    startTime,
    endTime: Date.now(),
  };
  return { call, callId, result, metadata: after.metadata, segment, images: outcome.images };
}

/**
 * `tool:execute` as the call starts, or with `after` once it is done: one object literal of one
 * shape per phase (no spread of a shared part).
 */
function announce(
  deps: Pick<ToolStepPorts, 'events'>,
  state: TurnState,
  callId: string,
  before: ToolBeforeContext,
  after?: ToolAfterContext,
): void {
  const { sessionId, turn } = state;
  const turnId = turn.id;
  const seq = ++turn.seq;
  const event: ToolExecuteEvent = after
    ? {
        sessionId,
        turnId,
        callId,
        name: after.name,
        phase: 'end',
        ok: after.ok,
        result: after.result,
        seq,
      }
    : { sessionId, turnId, callId, name: before.name, phase: 'start', args: before.args, seq };
  deps.events.emit('tool:execute', event);
}

/**
 * The images of a group's results, as a user message after them (chat APIs take images in user
 * messages, not in tool results); sent in this turn's later calls, never persisted.
 */
function imagesMessage(executed: ExecutedCall[], turnId: string): ModelMessage | undefined {
  const withImages = executed.filter((e) => e.images?.length);
  if (!withImages.length) return undefined;
  const names = withImages.map((e) => e.call.function.name).join(', ');
  return {
    role: 'user',
    content: `[Images returned by the tool results above: ${names}]`,
    images: withImages.flatMap((e) => e.images!),
    metadata: { turnId },
  };
}

/**
 * Why the call does not run at all: invalid arguments, refused by `agent:tool:before`, or not
 * offered to this call (none registered, or a hook removed it: the model gets the same answer
 * as for a tool that does not exist). `undefined` when it may run.
 */
function refusalOf(
  parseError: string | undefined,
  reached: boolean,
  offered: ReadonlySet<string> | undefined,
  name: string,
): ToolResult | undefined {
  if (parseError) return toolError(parseError);
  if (!reached) return toolError(`The call to "${name}" was refused`);
  if (offered && !offered.has(name)) return toolError(`Unknown tool "${name}"`);
  return undefined;
}

/** H5: the call acts with the identity of whoever authorised the input (`actor`). */
function toolContext(state: TurnState, callId: string): ToolCallContext {
  const lead = state.lead;
  return {
    sessionId: state.sessionId,
    turnId: state.turn.id,
    callId,
    userId: lead.actor?.userId ?? lead.userId,
    platform: lead.actor?.platform ?? lead.platform,
    actor: lead.actor,
    source: lead.source,
    acceptsImages: state.acceptsImages,
    signal: state.turn.signal,
  };
}

/** Runs the tool's handler through the instrumentation seam. */
function execute(
  deps: Pick<ToolStepPorts, 'tools' | 'instrumentation'>,
  before: ToolBeforeContext,
  context: ToolCallContext,
): Promise<ToolResult> {
  const { sessionId, turnId, callId, signal } = context;
  return deps.instrumentation.toolCall(
    { sessionId, turnId, callId, name: before.name, args: before.args, signal },
    () => deps.tools.execute(before.name, before.args, context),
  );
}

function parseArguments(text: string): { args: unknown; error?: string } {
  if (!text.trim()) return { args: {} };
  try {
    const args: unknown = JSON.parse(text);
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      return { args, error: 'Tool arguments must be a JSON object' };
    }
    return { args };
  } catch {
    return { args: text, error: `Tool arguments are not valid JSON: ${text.slice(0, 200)}` };
  }
}
