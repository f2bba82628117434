/**
 * The recall tool for a plain OpenAI chat-completions loop: its definition (add it to `tools`)
 * and its executor (one call in the host's tool dispatcher). Bad arguments are answered, not
 * thrown: the model reads what was wrong and calls again; the host's loop never sees an error.
 */
import type { Session } from '../../session/session';
import { redactSecrets } from '../redaction';
import { RECALL_DESCRIPTION, RECALL_PARAMETERS, RecallError, parseRecallArgs } from './args';
import { RECALL_TOOL_NAME } from './handles';
import { RecallIndex } from './recall-index';
import { searchIndex, type RecallAnswer, type SearchOptions } from './search';

/** The tool in the OpenAI function-calling format (`ChatCompletionTool`). */
export interface RecallToolDefinition {
  type: 'function';
  function: { name: typeof RECALL_TOOL_NAME; description: string; parameters: typeof RECALL_PARAMETERS };
}

export interface RecallTool {
  readonly definition: RecallToolDefinition;
  /**
   * Runs one call: `args` as the model sent them (the JSON string of a tool call, or an object).
   * Never throws for anything the model sent; `isError` answers say how to fix the call.
   */
  run(args: unknown): RecallAnswer;
}

/** How answers are counted, bounded and redacted (the search's options; config `redaction`; the log keeps the originals). */
export type RecallToolOptions = SearchOptions;

export const RECALL_TOOL_DEFINITION: RecallToolDefinition = Object.freeze({
  type: 'function',
  function: Object.freeze({ name: RECALL_TOOL_NAME, description: RECALL_DESCRIPTION, parameters: RECALL_PARAMETERS }),
});

/** Answers one recall call against a session's shadowed history. */
export function runRecall(session: Session, args: unknown, options: RecallToolOptions = {}): RecallAnswer {
  try {
    // The search redacts each text before it cuts a window of it; this pass covers the rest of
    // the answer (the query echoed in its head).
    const answer = searchIndex(RecallIndex.of(session), parseRecallArgs(args), options);
    return { ...answer, text: redactSecrets(answer.text, options.redaction).text };
  } catch (err) {
    if (err instanceof RecallError) return { text: `recall error: ${err.message}`, isError: true, matches: 0, shown: 0 };
    throw err;
  }
}

export function recallTool(session: Session, options: RecallToolOptions = {}): RecallTool {
  // Built now, not at the first call: the fold over a reopened log is paid while the agent starts.
  RecallIndex.of(session);
  return { definition: RECALL_TOOL_DEFINITION, run: (args) => runRecall(session, args, options) };
}
