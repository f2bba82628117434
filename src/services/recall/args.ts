/**
 * The recall tool's arguments: the zod schema (the one source of their type), the JSON schema
 * the model is shown, and the checks that turn what a model sent into a search or into an
 * error it can act on (which field, what was wrong, an example that works).
 */
import { z } from 'zod';
import { XcompactError } from '../../errors';
import { compileLinear, PatternError, type LinearPattern } from './linear-regex';

export const RECALL_DEFAULT_MAX_TOKENS = 2_000;
/** The largest answer one call may ask for: recall must not refill the context it was freed from. */
export const RECALL_MAX_TOKENS_CAP = 8_000;
/** Longer queries are refused (a fact is a line, a path, an identifier; not a file). */
export const RECALL_QUERY_MAX_CHARS = 2_000;

/** The codes the recall layer owns (src/error-codes.ts puts every layer's together). */
export type RecallErrorCode = 'recall-args';

/** A recall request that cannot run: `code` `recall-args`; the message says how to fix it. */
export class RecallError extends XcompactError {
  declare readonly code: RecallErrorCode;

  constructor(message: string) {
    super('recall-args', message);
  }
}

// Models in strict function-calling mode send null for fields they leave out.
const optionalText = z.string().nullish();

export const RecallArgsSchema = z.strictObject({
  query: optionalText,
  regex: z.boolean().nullish(),
  path: optionalText,
  handle: optionalText,
  maxTokens: z.number().nullish(),
});
export type RecallArgs = z.input<typeof RecallArgsSchema>;

/** The parameters of the tool definition, written out (byte-stable: it is part of every request's prompt prefix). */
export const RECALL_PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'Text to find (case-insensitive), or a regular expression when regex is true (JavaScript syntax without backreferences or lookaround).',
    },
    regex: { type: 'boolean', description: 'Treat query as a regular expression (default false).' },
    path: { type: 'string', description: 'A file path: the tool results of calls on it (reads, edits, runs), then other mentions.' },
    handle: {
      type: 'string',
      description: 'A handle named in the context: cp-N (a checkpoint: every message it condensed) or pr-N (a pruned result: its full text).',
    },
    maxTokens: { type: 'integer', description: `Answer budget in tokens (default ${RECALL_DEFAULT_MAX_TOKENS}, at most ${RECALL_MAX_TOKENS_CAP}).` },
  },
  additionalProperties: false,
} as const;

export const RECALL_DESCRIPTION =
  'Bring back the exact text of messages that are no longer in your context: what a checkpoint (<compacted-summary>) condensed, and tool results or arguments that were pruned. ' +
  'Give exactly one of query, path or handle. Returns the original excerpts with where they were (turn, tool call, checkpoint), newest first.';

export type RecallQuery =
  { kind: 'text'; text: string } | { kind: 'regex'; text: string; pattern: LinearPattern } | { kind: 'path'; text: string } | { kind: 'handle'; text: string };

export interface RecallRequest {
  query: RecallQuery;
  maxTokens: number;
  /** The maxTokens asked for, when it was above the cap (the answer says it was capped). */
  askedTokens?: number;
}

const EXAMPLE = 'for example {"query": "ENOENT"}, {"path": "src/app.ts"} or {"handle": "cp-12"}';

/** Parses raw arguments (a JSON string, as the OpenAI API delivers them, or an object). */
export function parseRecallArgs(raw: unknown): RecallRequest {
  let value = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') value = {};
    else {
      try {
        value = JSON.parse(raw);
      } catch {
        throw new RecallError(`the arguments are not valid JSON (${raw.slice(0, 80)}); send an object, ${EXAMPLE}.`);
      }
    }
  }
  const parsed = RecallArgsSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `field "${issue.path.join('.')}"` : 'the arguments';
    const what =
      issue.code === 'unrecognized_keys'
        ? `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`
        : `${where}: ${issue.message}`;
    throw new RecallError(`${what}; the fields are query, regex, path, handle and maxTokens, ${EXAMPLE}.`);
  }
  const args = parsed.data;
  const given = (['query', 'path', 'handle'] as const).filter((k) => args[k] !== undefined && args[k] !== null);
  if (given.length !== 1) {
    throw new RecallError(
      given.length === 0
        ? `nothing to look for: give one of query, path or handle, ${EXAMPLE}.`
        : `give only one of query, path or handle (got ${given.join(' and ')}); make one call per lookup.`,
    );
  }
  const key = given[0]!;
  const text = args[key]!;
  if (text.trim() === '') throw new RecallError(`${key} is empty: give the text to look for, ${EXAMPLE}.`);
  if (text.length > RECALL_QUERY_MAX_CHARS)
    throw new RecallError(`${key} is ${text.length} characters long (at most ${RECALL_QUERY_MAX_CHARS}): look for a distinctive line or identifier instead.`);
  if (args.regex && key !== 'query') throw new RecallError(`regex applies to query only; send {"query": "<pattern>", "regex": true}.`);

  const request = budget(args.maxTokens ?? undefined);
  if (key === 'path') return { ...request, query: { kind: 'path', text: text.trim() } };
  if (key === 'handle') return { ...request, query: { kind: 'handle', text: text.trim() } };
  if (!args.regex) return { ...request, query: { kind: 'text', text } };
  // A model may write the pattern as a literal, /…/flags: its flags are ours (gi), its body the pattern.
  const literal = /^\/(.+)\/[dgimsuvy]*$/s.exec(text);
  const source = literal ? literal[1]! : text;
  // Any pattern runs in time linear in the text (linear-regex.ts): none is refused for its shape.
  try {
    return { ...request, query: { kind: 'regex', text: source, pattern: compileLinear(source) } };
  } catch (err) {
    if (!(err instanceof PatternError)) throw err;
    throw new RecallError(`query is not a regular expression recall can run (${err.message}); fix it, or send it as plain text without "regex": true.`);
  }
}

function budget(asked: number | undefined): Pick<RecallRequest, 'maxTokens' | 'askedTokens'> {
  if (asked === undefined) return { maxTokens: RECALL_DEFAULT_MAX_TOKENS };
  if (!Number.isFinite(asked) || asked < 1)
    throw new RecallError(`maxTokens must be a positive whole number of tokens (at most ${RECALL_MAX_TOKENS_CAP}), got ${String(asked)}.`);
  const n = Math.floor(asked);
  return n > RECALL_MAX_TOKENS_CAP ? { maxTokens: RECALL_MAX_TOKENS_CAP, askedTokens: n } : { maxTokens: n };
}
