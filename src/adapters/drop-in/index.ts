/**
 * The drop-in: an `openai` client that records, compacts and recovers overflows inside
 * `chat.completions.create`, with the caller's own loop and `messages` array unchanged.
 */
export { withCompaction, providerOfBaseURL, type WithCompactionOptions, type Compaction, type CompactingClient } from './client';
export { sessionMessages } from './messages';
export { DropInError, type DropInErrorCode } from './errors';
