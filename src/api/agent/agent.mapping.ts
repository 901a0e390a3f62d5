import type {
  AbortOptions,
  Actor,
  IncomingMessage,
  MessageAttachment,
  ModelRef,
  Settlement,
} from '../../contracts';
import type { SettledResponse } from './agent-response.dto';
import type { AbortDto, MessageDto, ModelRefDto } from './agent.dto';

/** Keeps only the defined values, so that no `undefined` key reaches the agent or the wire. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A validated message body -> the agent's `IncomingMessage` (plain objects only). */
export function mapIncomingMessage(dto: MessageDto): IncomingMessage {
  return defined<IncomingMessage>({
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

/** A settlement -> the `?wait=true` answer. */
export function mapSettlement(settlement: Settlement): SettledResponse {
  if (settlement.settled !== 'turn') return { settled: settlement.settled };
  return defined<SettledResponse>({
    settled: 'turn',
    turnId: settlement.turnId,
    outcome: settlement.outcome,
    reply: settlement.reply,
  });
}

/** An abort body -> the agent's options, `by` being the authenticated caller. */
export function mapAbortOptions(dto: AbortDto | undefined, by: Actor | undefined): AbortOptions {
  return defined<AbortOptions>({
    turnId: dto?.turnId,
    queued: dto?.queued,
    reason: dto?.reason,
    by: by ? { platform: by.platform, userId: by.userId } : undefined,
  });
}

/** A model body -> `ModelRef`. */
export function mapModelRef(dto: ModelRefDto): ModelRef {
  return defined<ModelRef>({ provider: dto.provider, model: dto.model });
}
