/**
 * The registry of metadata keys the agent writes on persisted messages (docs/behaviour.md P1;
 * README, "What a turn writes"). Values are the stored camelCase keys.
 */
export const WellKnownMetadataKeys = {
  /** The turn's id: archived inputs, tool-call groups, replies, markers. */
  TurnId: 'turnId',
  /** `'opened'` or `'joined'`: archived inputs. */
  TurnEntry: 'turnEntry',
  /** `{ outcome, source?, error? }`: last persisted reply or the turn's event marker. */
  TurnRecord: 'turnRecord',
  /** The agent's id of a tool call: tool results. */
  CallId: 'callId',
  /** The `ModelRef` used: final reply. */
  Model: 'model',
  /** `{ prompt, completion }`: final reply. */
  Tokens: 'tokens',
  /** Where the turn ran: final reply. */
  Platform: 'platform',
  /** The bot's own identity on that platform: final reply. */
  SelfId: 'selfId',
  /** The group: final reply. */
  GroupId: 'groupId',
  /** The session type: final reply. */
  SessionKind: 'sessionKind',
  /** Decoded visible text of a structured-output envelope: final reply. */
  VisibleContent: 'visibleContent',
  /** The turn's timeline (`ContentSegment[]`, tool calls with their `callId`): final reply. */
  Segments: 'segments',
  /** `false` on assistant messages persisted but not sent in rooms (P2). */
  Sent: 'sent',
  /** Input fields kept with an archived input. */
  UserId: 'userId',
  Nickname: 'nickname',
  Source: 'source',
  Actor: 'actor',
  MessageId: 'messageId',
  Attachments: 'attachments',
  /** `ApprovalRecord` (approved or not, by whom, when): tool results of calls that needed approval. */
  Approval: 'approval',
  /** Who stopped a turn: on the `turn-stopped` marker. */
  StoppedBy: 'stoppedBy',
  /** Token count of the message, keyed by encoding, so nobody recounts it. */
  TokenCount: 'tokenCount',
} as const;

/** A registered metadata key name. */
export type WellKnownMetadataKey = keyof typeof WellKnownMetadataKeys;
