import { Body, Controller, Get, Post } from '@nestjs/common';

/** The host's own routes: the agent's module guards none of them. */
@Controller('chat')
export class ChatController {
  @Get('ping')
  ping(): { pong: true } {
    return { pong: true };
  }

  /** A classic HTML form post (`application/x-www-form-urlencoded`). */
  @Post('feedback')
  feedback(@Body() body: Record<string, string>): { thanks: string } {
    return { thanks: body.name ?? 'anonymous' };
  }
}
