/**
 * The errors of `InstanceMailbox.request`: the receiver's handler failed, no answer came in
 * time, or the requesting mailbox closed first.
 */

/** The receiver answered a request with an error (its handler threw, or it has none). */
export class MailboxRequestError extends Error {
  override readonly name = 'MailboxRequestError';

  /**
   * @param message the receiver's error message
   * @param type the request's message type
   * @param target the instance that was asked
   */
  constructor(
    message: string,
    readonly type: string,
    readonly target: string,
  ) {
    super(message);
  }
}

/** No answer came from the target instance within the request's timeout. */
export class MailboxTimeoutError extends Error {
  override readonly name = 'MailboxTimeoutError';

  /**
   * @param target the instance that was asked
   * @param type the request's message type
   * @param timeoutMs how long the requester waited
   */
  constructor(
    readonly target: string,
    readonly type: string,
    readonly timeoutMs: number,
  ) {
    super(`Request '${type}' to instance '${target}' got no answer within ${timeoutMs} ms`);
  }
}

/** The requesting mailbox closed while the request was still waiting for its answer. */
export class MailboxClosedError extends Error {
  override readonly name = 'MailboxClosedError';

  /**
   * @param instanceId the instance whose mailbox closed
   * @param target the instance that was asked
   * @param type the request's message type
   */
  constructor(
    readonly instanceId: string,
    readonly target: string,
    readonly type: string,
  ) {
    super(
      `Mailbox of instance '${instanceId}' closed before instance '${target}' answered request '${type}'`,
    );
  }
}
