import type {
  AbortOptions,
  Actor,
  IncomingMessage,
  MessageAttachment,
  ModelRef,
  SessionSettingsPatch,
  Settlement,
} from '../../contracts';
import { InputRefusedException } from '../http/api-error';
import type { SettledResponse } from './agent-response.dto';
import type {
  AbortAllDto,
  AbortDto,
  MessageDto,
  ModelRefDto,
  SessionSettingsDto,
} from './agent.dto';

/** Keeps only the defined values, so that no `undefined` key reaches the agent or the wire. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A validated message body -> the agent's `IncomingMessage` (plain objects only). */
export function mapIncomingMessage(dto: MessageDto): IncomingMessage {
  return defined<IncomingMessage>({
    id: dto.id,
    sessionId: dto.sessionId,
    content: dto.content,
    userId: dto.userId,
    platform: dto.platform,
    source: dto.source,
    actor: dto.actor ? { platform: dto.actor.platform, userId: dto.actor.userId } : undefined,
    attachments: dto.attachments?.map((a) =>
      defined<MessageAttachment>({
        kind: a.kind,
        data: a.data,
        mimeType: a.mimeType,
        name: a.name,
      }),
    ),
    sessionKind: dto.sessionKind,
  });
}

/**
 * A settlement -> the `?wait=true` answer: the turn's outcome with its `reply` or `error`
 * notice, or why the input was dropped.
 */
export function mapSettlement(settlement: Settlement): SettledResponse {
  if (settlement.settled === 'dropped') return { settled: 'dropped', reason: settlement.reason };
  if (settlement.settled !== 'turn') return { settled: settlement.settled };
  return defined<SettledResponse>({
    settled: 'turn',
    turnId: settlement.turnId,
    outcome: settlement.outcome,
    reply: settlement.reply,
    error: settlement.error,
  });
}

/**
 * The error a settlement is answered with instead of `200`, if any: an input dropped because
 * the agent could not take it now (its session's waiting list full: 429; a store unavailable:
 * 503), which the caller should send again later. Every other settlement is a `200`.
 */
export function refusalOf(settlement: Settlement): InputRefusedException | undefined {
  if (settlement.settled !== 'dropped') return undefined;
  const { reason } = settlement;
  return reason === 'queue-full' || reason === 'store-unavailable'
    ? new InputRefusedException(reason)
    : undefined;
}

/** An abort body -> the agent's options, `by` being the authenticated caller. */
export function mapAbortOptions(
  dto: AbortDto | AbortAllDto | undefined,
  by: Actor | undefined,
): AbortOptions {
  return defined<AbortOptions>({
    turnId: dto && 'turnId' in dto ? dto.turnId : undefined,
    queued: dto?.queued,
    reason: dto?.reason,
    by: by ? { platform: by.platform, userId: by.userId } : undefined,
  });
}

/** A settings body -> the patch `updateSession` takes (only the fields given). */
export function mapSessionSettings(dto: SessionSettingsDto | undefined): SessionSettingsPatch {
  return defined<SessionSettingsPatch>({
    model: dto?.model ? mapModelRef(dto.model) : undefined,
    think: dto?.think,
    maxToolIterations: dto?.maxToolIterations,
    historyLimit: dto?.historyLimit,
  });
}

/** A model body -> `ModelRef`. */
export function mapModelRef(dto: ModelRefDto): ModelRef {
  return defined<ModelRef>({ provider: dto.provider, model: dto.model });
}
