import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ProviderUsage,
} from '../../contracts';

/** One finished model call. */
export interface ModelCallObservation {
  provider: string;
  seconds: number;
  status: 'ok' | 'error' | 'aborted';
  /** Usage the provider reported, if any. */
  usage?: ProviderUsage;
}

/** Told about every model call of a provider. Must not throw (it is guarded anyway). */
export type ModelCallObserver = (observation: ModelCallObservation) => void;

const OBSERVERS = Symbol.for('api:model_call_observers');

type Observed = LlmProvider & { [OBSERVERS]?: Set<ModelCallObserver> };

/**
 * Times every `chat` / `stream` call of a provider and reports it to the registered observers.
 *
 * NOTE: the agent has no model-call event and `api/` may not reach the hook registry, so the
 * provider's two methods are wrapped once, in place; each application adds and removes its own
 * observer, so several applications sharing one provider do not count each other's calls
 * twice. The wrapper changes nothing the agent sees: same chunks, same errors, same timing.
 */
export function observeModelCalls(provider: LlmProvider, observer: ModelCallObserver): () => void {
  const target = provider as Observed;
  if (!target[OBSERVERS]) install(target);
  target[OBSERVERS]!.add(observer);
  return () => target[OBSERVERS]?.delete(observer);
}

function install(provider: Observed): void {
  const observers = new Set<ModelCallObserver>();
  Object.defineProperty(provider, OBSERVERS, { value: observers, enumerable: false });
  const report = (startedAt: number, request: ChatRequest, ok: boolean, usage?: ProviderUsage) => {
    const observation: ModelCallObservation = {
      provider: provider.id,
      seconds: (performance.now() - startedAt) / 1000,
      status: ok ? 'ok' : request.signal?.aborted ? 'aborted' : 'error',
      usage,
    };
    for (const observer of observers) {
      try {
        observer(observation);
      } catch {
        // An observer never breaks a model call.
      }
    }
  };
  const chat = provider.chat.bind(provider);
  provider.chat = async (request: ChatRequest): Promise<ChatResponse> => {
    const startedAt = performance.now();
    try {
      const response = await chat(request);
      report(startedAt, request, true, response?.usage);
      return response;
    } catch (error) {
      report(startedAt, request, false);
      throw error;
    }
  };
  if (typeof provider.stream === 'function') {
    const stream = provider.stream.bind(provider);
    provider.stream = (request: ChatRequest) => timed(stream, request, report);
  }
}

async function* timed(
  stream: (request: ChatRequest) => AsyncIterable<ChatStreamChunk>,
  request: ChatRequest,
  report: (startedAt: number, request: ChatRequest, ok: boolean, usage?: ProviderUsage) => void,
): AsyncGenerator<ChatStreamChunk> {
  const startedAt = performance.now();
  let ok = false;
  let usage: ProviderUsage | undefined;
  try {
    for await (const chunk of stream(request)) {
      if (chunk?.usage) usage = chunk.usage;
      yield chunk;
    }
    ok = true;
  } finally {
    report(startedAt, request, ok, usage);
  }
}
