import { applyDecorators, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { THROTTLERS } from '../api.module-definition';
import { AgentApiGuard } from '../auth/agent-api.guard';
import { ApiExceptionFilter } from './api-exception.filter';
import { ApiThrottlerGuard } from './api-throttler.guard';
import { createValidationPipe } from './validation';

/**
 * What every controller of the module carries, on its own routes only (nothing app-wide): the
 * caller check first (the admin token or the host's guard), so that wrong tokens count
 * against the `auth` limit only and never use up the `admin` limit of the operator's address;
 * then the `admin` rate limit; validation of every body and query; one error shape.
 */
export const AgentApiRoutes = () =>
  applyDecorators(
    ApiBearerAuth(),
    UseGuards(AgentApiGuard, ApiThrottlerGuard),
    SkipThrottle({ [THROTTLERS.public]: true }),
    UsePipes(createValidationPipe()),
    UseFilters(ApiExceptionFilter),
  );
