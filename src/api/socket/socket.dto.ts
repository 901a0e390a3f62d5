import { Type } from 'class-transformer';
import {
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  Min,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { IsIdentifier } from '../agent/agent.dto';

/** `resume` of a `subscribe`: the turn whose stream the client follows and the last `seq` it has. */
export class ResumeDto {
  @IsIdentifier()
  turnId!: string;

  /** `seq` of the last event received; `0` replays the turn from its start. */
  @IsInt()
  @Min(0)
  afterSeq!: number;
}

/** Payload of the socket `subscribe` event: one session, or all of them. */
export class SubscribeDto {
  /** Required unless `all` is true (and always with `resume`). */
  @ValidateIf(
    (o: SubscribeDto) => o.all !== true || o.sessionId !== undefined || o.resume !== undefined,
  )
  @IsIdentifier()
  sessionId?: string;

  @IsOptional()
  @IsIn([true], { message: '$property must be true when given' })
  all?: true;

  /** Resume a turn's stream: its events after `afterSeq` first (README, "Resuming a turn's stream"). */
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => ResumeDto)
  resume?: ResumeDto;
}
