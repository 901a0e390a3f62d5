/**
 * `nest-agent-orchestrator/api`: the agent's REST routes, Socket.IO gateway, dashboard, health
 * indicator and metrics as a module a host imports (README.md, "Embedding the API"). Needs the
 * optional peers `@nestjs/platform-express`, `@nestjs/websockets`, `@nestjs/platform-socket.io`,
 * `@nestjs/swagger`, `@nestjs/throttler`, `@nestjs/terminus`, `class-validator`,
 * `class-transformer` and `prom-client`.
 *
 * @packageDocumentation
 * @module nest-agent-orchestrator/api
 */
export { AgentApiModule } from './api.module';
export {
  ApiOptionsError,
  type AgentApiModuleExtras,
  type AgentApiModuleOptions,
  type DashboardMount,
  type RateLimit,
} from './api.module-definition';
export { AgentModuleMissingError } from './agent-backend';
export { AgentHealthIndicator } from './health/agent-health.indicator';
export { AgentMetrics } from './metrics/agent-metrics.service';
export { AgentIoAdapter } from './socket/agent-io.adapter';
export type { AuthenticatedRequest } from './auth/auth.decorators';
export type { ErrorBody, FieldErrors } from './http/api-error';
export {
  AcceptedResponse,
  ClearedResponse,
  ErrorResponse,
  HistoryResponse,
  QueueResponse,
  SessionListResponse,
  SessionResponse,
  SessionSettingsResponse,
  SessionSummaryResponse,
  SettledResponse,
  StoppedAllResponse,
  StoppedResponse,
  UsageResponse,
} from './agent/agent-response.dto';
export { ApprovalsResponse, DecidedResponse, PendingApprovalResponse } from './agent/approvals.dto';
export type {
  ClientToServerEvents,
  ServerEventName,
  ServerEventPayload,
  ServerToClientEvents,
  SocketAbortPayload,
  SocketApprovalEvent,
  SocketApprovePayload,
  SocketToolEvent,
  SocketTurnEvent,
  SubscribeAck,
  SubscribePayload,
} from './socket/socket-events';
