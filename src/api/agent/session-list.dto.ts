import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import {
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateBy,
  buildMessage,
  type ValidationOptions,
} from 'class-validator';
import { decodeSessionCursor, SESSION_PAGE, SESSION_STATES } from '../../agent';
import type { SessionState } from '../../contracts';
import { toInteger } from '../http/validation';

/** Longest `cursor` of `GET /agent/sessions` (real ones are a few dozen characters). */
export const MAX_CURSOR_LENGTH = 2048;

/** class-validator: a `nextCursor` of the session list (opaque, but it must decode). */
const IsSessionCursor = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isSessionCursor',
      validator: {
        validate: (value: unknown) =>
          typeof value === 'string' && decodeSessionCursor(value) !== undefined,
        defaultMessage: buildMessage(
          (each) => `${each}$property must be a nextCursor of this list`,
          options,
        ),
      },
    },
    options,
  );

/** Query of `GET /agent/sessions`. */
export class SessionListQueryDto {
  @ApiPropertyOptional({
    minimum: 1,
    maximum: SESSION_PAGE.max,
    default: SESSION_PAGE.default,
    description: 'Sessions per page, most recent activity first',
  })
  @IsOptional()
  @Transform(toInteger)
  @IsInt()
  @Min(1)
  @Max(SESSION_PAGE.max)
  limit?: number;

  @ApiPropertyOptional({
    maxLength: MAX_CURSOR_LENGTH,
    description: 'The `nextCursor` of the page before (opaque): the next page',
  })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_CURSOR_LENGTH)
  @IsSessionCursor()
  cursor?: string;

  @ApiPropertyOptional({ enum: SESSION_STATES, description: 'Only the sessions in this state' })
  @IsOptional()
  @IsIn(SESSION_STATES)
  state?: SessionState;
}
