import { Injectable } from '@nestjs/common';
import type { ChatResponse, Settlement, TurnEnd } from '../contracts';
import type { ToolResult } from './tools';

/** An input on its way from `handleMessage` to its settlement. */
export interface InputInfo {
  sessionId: string;
  /** Absent for human inputs. */
  source?: string;
  /** The caller's message id, when given. */
  messageId?: string;
}

/** A turn, from `agent:turn:before` to its end. */
export interface TurnInfo {
  sessionId: string;
  turnId: string;
  source?: string;
  /** Inputs that opened it. */
  opened: number;
}

/** One model call of a turn (format retries included). */
export interface ModelCallInfo {
  sessionId: string;
  turnId: string;
  /** Provider instance id. */
  provider: string;
  model: string;
  /** 1 for the turn's first call. */
  call: number;
  /** Aborted when the turn is stopped. */
  signal: AbortSignal;
}

/** One tool call of a turn. */
export interface ToolCallInfo {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  signal: AbortSignal;
}

/** A turn ends with its `TurnEnd`, or `undefined` when `agent:turn:before` blocked it. */
export type TurnConclusion = TurnEnd | undefined;

/**
 * One layer of instrumentation (metrics, tracing, ...): each method wraps a piece of work and must
 * call `run` exactly once and return (or rethrow) what it gives. Methods a layer leaves out cost
 * nothing.
 */
export interface InstrumentationLayer {
  input?(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement>;
  turn?(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion>;
  modelCall?(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse>;
  toolCall?(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult>;
}

type Kind = keyof InstrumentationLayer;
type Run<K extends Kind> = Parameters<NonNullable<InstrumentationLayer[K]>>[1];
type Info<K extends Kind> = Parameters<NonNullable<InstrumentationLayer[K]>>[0];

/**
 * The instrumentation seam: the engine runs an input's life, a turn, a model call and a tool
 * call through these four methods. The default adds nothing but the layers registered with
 * `use` (the server's metrics register one); a host replaces it by class, e.g.
 * `AgentModule.forRoot({...}, providers: [{ provide: AgentInstrumentation, useClass: Mine }])`
 * with `class Mine extends AgentInstrumentation`, overriding the methods it cares about.
 */
@Injectable()
export class AgentInstrumentation {
  private readonly layers: InstrumentationLayer[] = [];

  /** Adds a layer (outermost last); returns the function that removes it. */
  use(layer: InstrumentationLayer): () => void {
    this.layers.push(layer);
    return () => {
      const at = this.layers.indexOf(layer);
      if (at >= 0) this.layers.splice(at, 1);
    };
  }

  /** An input, from `handleMessage` to its settlement. */
  input(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement> {
    return this.wrap('input', info, run);
  }

  /** A turn, from `agent:turn:before` to its end (`undefined`: blocked). */
  turn(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion> {
    return this.wrap('turn', info, run);
  }

  /** One model call, until its answer is complete (streamed chunks included). */
  modelCall(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse> {
    return this.wrap('modelCall', info, run);
  }

  /** One tool call, from its handler's start to its result. */
  toolCall(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult> {
    return this.wrap('toolCall', info, run);
  }

  private wrap<K extends Kind>(kind: K, info: Info<K>, run: Run<K>): ReturnType<Run<K>> {
    let next = run as () => Promise<unknown>;
    for (const layer of this.layers) {
      const method = layer[kind] as
        ((info: Info<K>, run: () => Promise<unknown>) => Promise<unknown>) | undefined;
      if (!method) continue;
      const inner = next;
      next = () => method.call(layer, info, inner);
    }
    return next() as ReturnType<Run<K>>;
  }
}
