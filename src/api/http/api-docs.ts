import { applyDecorators } from '@nestjs/common';
import {
  ApiBadRequestResponse,
  ApiPayloadTooLargeResponse,
  ApiServiceUnavailableResponse,
  ApiTooManyRequestsResponse,
  ApiUnauthorizedResponse,
  DocumentBuilder,
  type OpenAPIObject,
} from '@nestjs/swagger';
import { ErrorResponse } from '../agent/agent-response.dto';

/** The error answers every admin route may give, for the OpenAPI document. */
export const ApiErrorResponses = () =>
  applyDecorators(
    ApiBadRequestResponse({ type: ErrorResponse, description: 'Invalid body (fields named)' }),
    ApiUnauthorizedResponse({ type: ErrorResponse, description: 'Missing or wrong admin token' }),
    ApiPayloadTooLargeResponse({ type: ErrorResponse, description: 'Body too large' }),
    ApiTooManyRequestsResponse({
      type: ErrorResponse,
      description: 'Rate limited, or (`?wait=true`) the session waiting list full: `Retry-After`',
    }),
    ApiServiceUnavailableResponse({
      type: ErrorResponse,
      description: 'A store is unavailable (the store named): `Retry-After`',
    }),
  );

/** The OpenAPI document's header; routes and schemas come from the controllers and DTOs. */
export function openApiConfig(): Omit<OpenAPIObject, 'paths'> {
  return (
    new DocumentBuilder()
      .setTitle('Agent orchestrator')
      .setDescription(
        'Admin REST API of the agent (README.md, "REST API"). Live events: Socket.IO namespace /agent.',
      )
      .setVersion('1')
      // Not `addBearerAuth`: it says `bearerFormat: 'JWT'`, and the admin token is opaque.
      .addSecurity('bearer', {
        type: 'http',
        scheme: 'bearer',
        description: 'AGENT_ADMIN_TOKEN (an opaque token, not a JWT)',
      })
      .build()
  );
}
