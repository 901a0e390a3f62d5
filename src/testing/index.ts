/**
 * Helpers for testing a host's agents, at `nest-agent-orchestrator/testing`: a scriptable
 * OpenAI-compatible HTTP server ({@link FakeOpenAiServer}) to point a real
 * `OpenAiCompatibleProvider` at, and an in-process provider whose calls the test answers one by
 * one ({@link ScriptedProvider}). It loads Node built-ins only (the library's contracts are
 * used for their types): no Nest, no server packages; the main entry does not re-export any of
 * it. `test/public-surface.spec.ts` pins these names.
 *
 * @packageDocumentation
 * @module nest-agent-orchestrator/testing
 */

export { FakeOpenAiServer } from './fake-openai-server';
export type {
  FakeErrorScript,
  FakeFaultScript,
  FakeRawScript,
  FakeScript,
  FakeScriptBase,
  FakeTextScript,
  FakeToolCall,
  FakeToolCallsScript,
  FakeUsage,
} from './fake-openai.scripts';
export { ScriptedHttpServer } from './scripted-http-server';
export { listenLocal, type ReceivedHttpRequest } from './http-plumbing';
export { ScriptedProvider } from './scripted-provider';
export {
  ScriptedAbortError,
  ScriptedCall,
  type ScriptedAnswer,
  type ScriptedOutcome,
} from './scripted-call';
