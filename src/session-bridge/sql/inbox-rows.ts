import type { Kysely, Selectable } from 'kysely';
import { normaliseText, type InboxEntry, type Settlement } from '../../contracts';
import type { Database, InboxTable } from './schema';

/** Ids per `in (...)` list: well under SQLite's and PostgreSQL's bound-parameter limits. */
const IDS_CHUNK = 500;

/** Each of `messages` with its entry, read from `stored`; a repeat of an id is a duplicate. */
export function acceptResults(
  messages: ReadonlyArray<{ id: string }>,
  inserted: Set<string>,
  stored: Map<string, Selectable<InboxTable>>,
): Array<{ entry: InboxEntry; duplicate: boolean }> {
  // A repeat within the batch is a duplicate of its first occurrence.
  return messages.map((message) => {
    const duplicate = !inserted.delete(message.id);
    return { entry: fromRow(stored.get(message.id)!), duplicate };
  });
}

/**
 * SQLite: reserves `count` numbers of the inbox counter in the caller's transaction (one atomic
 * upsert) and returns the first.
 */
export async function reserveSeqs(trx: Kysely<Database>, count: number): Promise<number> {
  const row = await trx
    .insertInto('inbox_counter')
    .values({ name: 'inbox', value: count })
    .onConflict((oc) =>
      oc.column('name').doUpdateSet((eb) => ({ value: eb('inbox_counter.value', '+', count) })),
    )
    .returning('value')
    .executeTakeFirstOrThrow();
  return Number(row.value) - count + 1;
}

/** `ids`, normalised, in lists of at most `IDS_CHUNK`, without duplicates; none for none. */
export function chunks(ids: readonly string[]): string[][] {
  const unique = [...new Set(ids.map(normaliseText))];
  const out: string[][] = [];
  for (let i = 0; i < unique.length; i += IDS_CHUNK) out.push(unique.slice(i, i + IDS_CHUNK));
  return out;
}

/** The entry of a row; absent optional fields stay absent. */
export function fromRow(row: Selectable<InboxTable>): InboxEntry {
  const entry: InboxEntry = {
    id: row.id,
    sessionId: row.session_id,
    message: JSON.parse(row.message) as InboxEntry['message'],
    seq: Number(row.seq),
    acceptedAt: row.accepted_at,
  };
  if (row.turn_id != null) entry.turnId = row.turn_id;
  if (row.settlement != null) entry.settlement = JSON.parse(row.settlement) as Settlement;
  return entry;
}
