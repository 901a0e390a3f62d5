import type { Attributes, Span } from '@opentelemetry/api';
import type { Actor, ChatResponse, Settlement, TurnEnd } from '../../contracts';
import type { TurnConclusion } from '../instrumentation';

/** The tracer's name: the library's. */
export const TRACER_NAME = 'nest-agent-orchestrator';

/** Span names (interface.md section 8). */
export const SPAN = {
  input: 'agent.input',
  turn: 'invoke_agent',
  chat: (model: string) => `chat ${model}`,
  tool: (name: string) => `execute_tool ${name}`,
  hook: (hook: string) => `agent.hook ${hook}`,
} as const;

/** What a running turn's span counts while it is open. */
export interface TurnRecord {
  span: Span;
  joined: number;
  modelCalls: number;
  toolCalls: number;
}

/** `agent.by.*` of whoever stopped a turn, when a person did. */
export function byAttributes(by: Actor | undefined): Attributes {
  return by ? { 'agent.by.platform': by.platform, 'agent.by.user_id': by.userId } : {};
}

/** What an input's settlement says on its span. */
export function settlementAttributes(settlement: Settlement): Attributes {
  const attributes: Attributes = { 'agent.input.settled': settlement.settled };
  if (settlement.settled === 'turn') attributes['agent.turn.id'] = settlement.turnId;
  if (settlement.settled === 'dropped') attributes['agent.input.drop_reason'] = settlement.reason;
  return attributes;
}

/** The outcome of a turn (`blocked` when `agent:turn:before` did not let it run). */
export function outcomeOf(end: TurnConclusion): TurnEnd['outcome'] | 'blocked' {
  return end ? end.outcome : 'blocked';
}

/** What a model's answer says on its call's span (usage, the model that answered, why it stopped). */
export function answerAttributes(response: ChatResponse): Attributes {
  const attributes: Attributes = {};
  const usage = response.usage;
  if (usage?.promptTokens !== undefined) {
    attributes['gen_ai.usage.input_tokens'] = usage.promptTokens;
  }
  if (usage?.completionTokens !== undefined) {
    attributes['gen_ai.usage.output_tokens'] = usage.completionTokens;
  }
  if (response.responseModel) attributes['gen_ai.response.model'] = response.responseModel;
  if (response.finishReason) {
    attributes['gen_ai.response.finish_reasons'] = [response.finishReason];
  } else if (response.toolCalls?.length) {
    attributes['gen_ai.response.finish_reasons'] = ['tool_calls'];
  }
  return attributes;
}

/** The model's answer as `gen_ai.output.messages` (content recording on). */
export function outputMessages(response: ChatResponse): string {
  const parts: unknown[] = [];
  if (response.reasoningContent)
    parts.push({ type: 'reasoning', content: response.reasoningContent });
  if (response.content) parts.push({ type: 'text', content: response.content });
  for (const call of response.toolCalls ?? []) {
    parts.push({
      type: 'tool_call',
      id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
    });
  }
  return JSON.stringify([{ role: 'assistant', parts }]);
}
