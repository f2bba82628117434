/**
 * The drop-in: an `openai` client that records, compacts and recovers overflows inside
 * `chat.completions.create` (and `responses.create`), with the caller's own loop and messages
 * unchanged; an `@anthropic-ai/sdk` client the same way.
 */
export { withCompaction, providerOfBaseURL, type WithCompactionOptions, type Compaction, type CompactingClient } from './client';
export { sessionMessages } from './messages';
