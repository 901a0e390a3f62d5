import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import {
  AgentHook,
  AgentTool,
  PromptContribution,
  type HookNext,
  type PromptView,
  type QueueEvent,
  type ReplyBeforeContext,
  type ToolCallContext,
} from 'nest-agent-orchestrator';

/** Everything the host adds to the agent, on one provider: discovered at bootstrap. */
@Injectable()
export class SupportAgent {
  /** A hook: card numbers never leave the process, whatever the model wrote. */
  @AgentHook('agent:reply:before')
  async redactCardNumbers(ctx: ReplyBeforeContext, next: HookNext): Promise<void> {
    const redacted = ctx.content.replace(/\b(?:\d[ -]?){12,15}\d\b/g, '[redacted]');
    if (redacted !== ctx.content) console.log(`[hook] redacted a card number in ${ctx.turnId}`);
    ctx.content = redacted;
    await next();
  }

  /** A tool the model may call; its arguments are validated against `parameters` first. */
  @AgentTool({
    name: 'order_status',
    description: 'Looks up the status of an order by its id',
    parameters: {
      type: 'object',
      properties: { orderId: { type: 'string' } },
      required: ['orderId'],
    },
  })
  async orderStatus(args: { orderId: string }, ctx: ToolCallContext) {
    // ctx.signal is aborted when the turn is stopped: pass it to your HTTP client.
    console.log(`[tool] order_status ${args.orderId} for ${ctx.userId ?? 'anonymous'}`);
    return { orderId: args.orderId, status: 'shipped', carrier: 'DHL' };
  }

  /** A prompt contribution: a block of the system prompt, counted under `systemOther`. */
  @PromptContribution({ key: 'policy', bucket: 'systemOther' })
  policy(view: PromptView): string {
    if (!view.dryRun) console.log(`[prompt] policy for ${view.sessionId}`);
    return 'Refund policy of Example Ltd: 30 days, no questions asked.';
  }

  /** An event listener: inputs that arrive while the agent is busy wait, or join the turn. */
  @OnEvent('agent:queue')
  onQueue(event: QueueEvent): void {
    console.log(`[queue] ${event.sessionId}: ${event.waiting.length} waiting`);
  }
}
