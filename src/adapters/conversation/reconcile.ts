/**
 * Which of the caller's messages are new. The caller passes either its whole conversation
 * (the usual loop: `messages.push(...)`, then `create({ messages })`) or only what is new since
 * the last call (possibly starting with the reply it got back). Both are read the same way:
 * the longest run of recorded messages the caller's list starts with, at the end of the
 * recording, is already there; everything after it is new. A face whose caller always passes
 * the whole conversation (the AI SDK builds its prompt from the app's messages) says `whole`:
 * then a list that does not begin as the recording does has lost or changed a message.
 */
import { ConversationError } from './errors';

/**
 * The index of the caller's first new message. `recorded` and `given` are fingerprints in
 * order. Throws `history-diverged` when the caller's list starts as the recorded conversation
 * does but does not continue it (an edited or dropped message): appending it would record the
 * conversation twice.
 */
export function firstNewMessage(recorded: readonly string[], given: readonly string[], options: { whole?: boolean } = {}): number {
  const n = recorded.length;
  if (given.length >= n && startsWith(given, recorded, 0, n)) return n;
  if (options.whole) throw diverged(recorded, given);
  // Only the newest messages: the longest tail of the recording the caller's list starts with.
  for (let j = Math.min(n - 1, given.length); j > 0; j--) {
    if (startsWith(given, recorded, n - j, j)) return j;
  }
  if (n > 0 && given.length > 0 && given[0] === recorded[0]) throw diverged(recorded, given);
  return 0;
}

function diverged(recorded: readonly string[], given: readonly string[]): ConversationError {
  const k = divergence(recorded, given);
  return new ConversationError(
    'history-diverged',
    `the messages do not continue the recorded conversation: message ${k} ${k < given.length ? 'differs from the recorded one' : 'is missing'} (${recorded.length} recorded, ${given.length} given). ` +
      'Pass the previous messages unchanged and append to them (or only the new ones); for another conversation, use another session. Nothing was recorded or sent',
  );
}

function startsWith(given: readonly string[], recorded: readonly string[], from: number, count: number): boolean {
  for (let i = 0; i < count; i++) if (given[i] !== recorded[from + i]) return false;
  return true;
}

function divergence(recorded: readonly string[], given: readonly string[]): number {
  let k = 0;
  while (k < recorded.length && k < given.length && recorded[k] === given[k]) k++;
  return k;
}
