/**
 * The stateless half of the log rules: an event's shape (its data schema, surfaceOp and
 * provenance) checked before any projection is asked. Pure functions; each throws a
 * SessionRuleError naming the rule.
 */
import { z } from 'zod';
import { SessionRuleError } from './errors';
import { compileSchema, FAILED, type Compiled } from './fast-check';
import { storable } from './storable';
import { EVENT_TYPES, EventDataSchemas, StoredEventSchema, SurfaceOpSchema, isSurfaceType, type EventType, type SurfaceOp } from './events';

/**
 * The version of the log rules an event is checked by (the data schemas and envelope rules
 * here). Bump it whenever they change: lines a store vouches were checked under other rules
 * (StoredSnapshot.checked) are then checked again on replay.
 */
export const LOG_RULES_VERSION = 1;

/** An event as validated: what is committed and stored. */
export interface ParsedEvent {
  type: EventType;
  data: unknown;
  surfaceOp: SurfaceOp | undefined;
  sourceEventSeqs: readonly number[] | undefined;
}

const SourceSeqsSchema = z.array(z.number().int().min(0));

const compiledSchemas = new Map<EventType, Compiled | undefined>();
/** The compiled functions of a type's data schema, undefined when it cannot be compiled (zod then does it all). */
function compiledOf(type: EventType): Compiled | undefined {
  if (!compiledSchemas.has(type)) compiledSchemas.set(type, compileSchema(EventDataSchemas[type]));
  return compiledSchemas.get(type);
}

function formatZodIssues(type: string, issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues.map((i) => `${type} data${i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${i.message}`).join('; ');
}

/**
 * Tool definitions are recorded as sent: the SDK sends `JSON.stringify(tools)`, so they are
 * copied through JSON (the log neither shares, and freezes, the caller's objects nor holds a
 * Date where the wire had its string). Not JSON at all (BigInt, cycles) is a rejected append;
 * the copy must still pass the storable rule (no U+0000, no lone surrogate).
 */
function normaliseTools(data: { tools: Record<string, unknown>[] }): void {
  try {
    data.tools = JSON.parse(JSON.stringify(data.tools)) as Record<string, unknown>[];
  } catch (err) {
    throw new SessionRuleError('not-storable', `request/header data.tools must be plain JSON: ${(err as Error).message}`);
  }
}

/** What `append` and `check` are given must at least be an object naming a type. */
export function checkInput(input: unknown): void {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new SessionRuleError(
      'invalid-input',
      `an append takes an object {type, data, surfaceOp?, sourceEventSeqs?}; got ${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}.`,
    );
  }
  const type = (input as { type?: unknown }).type;
  if (typeof type !== 'string') {
    throw new SessionRuleError('invalid-input', `an append's type must be an event type string; got ${type === null ? 'null' : typeof type}.`);
  }
}

type StoredEnvelope = z.infer<typeof StoredEventSchema>;

const ENVELOPE_KEYS = new Set(['seq', 'type', 'time', 'data', 'surfaceOp']);
const TYPES = new Set<string>(EVENT_TYPES);

/**
 * The envelope most stored lines have (no replace, no provenance), checked by hand: a reopen
 * reads one per event, and this is a strict subset of what StoredEventSchema accepts, giving
 * the same value (its data is `unknown` there too). Anything else goes through the schema.
 */
function commonEnvelope(value: unknown): StoredEnvelope | undefined {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return undefined;
  const v = value as Record<string, unknown>;
  for (const k in v) if (!ENVELOPE_KEYS.has(k)) return undefined;
  // The schema requires the key even though any value passes.
  if (!Object.hasOwn(v, 'data')) return undefined;
  if (!Number.isSafeInteger(v.seq) || (v.seq as number) < 0) return undefined;
  if (typeof v.type !== 'string' || !TYPES.has(v.type) || typeof v.time !== 'string' || v.time.length === 0) return undefined;
  if (v.surfaceOp !== undefined && v.surfaceOp !== 'append') return undefined;
  return v as StoredEnvelope;
}

const CANONICAL = ['seq', 'type', 'time', 'data', 'surfaceOp'];

/**
 * Are the keys of a line that passed the common envelope in an event's own order (seq, type,
 * time, data, surfaceOp)? Then the line can be the event as it is: it serialises as the event
 * appended live did (a store that reorders keys, as jsonb does, gets a copy in that order).
 */
export function inEventOrder(value: object): boolean {
  let i = 0;
  for (const k in value) {
    if (k !== CANONICAL[i]) return false;
    i++;
  }
  return true;
}

/** A stored line's envelope, before the log rules: its event and the seq it claims. */
export function parseStoredLine(value: unknown, position: number): StoredEnvelope {
  let e = commonEnvelope(value);
  if (!e) {
    const shape = StoredEventSchema.safeParse(value);
    if (!shape.success) throw new SessionRuleError('stored-shape', formatZodIssues('stored event', shape.error.issues));
    e = shape.data;
  }
  if (e.seq !== position) {
    throw new SessionRuleError('seq-position', `event has seq ${e.seq} but is at log position ${position}.`);
  }
  return e;
}

/** Where an event being checked comes from (see {@link parseEvent}). */
export interface EventOrigin {
  /** Read back from a store, its envelope already checked by parseStoredLine. */
  stored?: boolean;
  /** The store vouches for the line's bytes (only with `stored`): the data schema is skipped. */
  checked?: boolean;
}

/**
 * Checks an event's own shape as it would take log position `seq`. `stored`: a line read back
 * from a store, whose envelope (surfaceOp, sourceEventSeqs) parseStoredLine already checked and
 * whose values came from JSON.parse, so the tools need no JSON round trip; its data is still
 * checked against the type's schema, unless `checked`: the store vouches these are the bytes a
 * writer stored after these same rules accepted the event (a replayed line is then the schema's
 * own output, which the schema gives back unchanged).
 */
export function parseEvent(
  seq: number,
  type: EventType,
  rawData: unknown,
  rawSurfaceOp: unknown,
  rawSourceEventSeqs: unknown,
  { stored = false, checked = false }: EventOrigin = {},
): ParsedEvent {
  // Own keys only: a type like "toString" must be a rule error, not a TypeError.
  const schema = Object.hasOwn(EventDataSchemas, type) ? EventDataSchemas[type] : undefined;
  if (!schema) throw new SessionRuleError('unknown-type', `unknown event type ${JSON.stringify(type)}.`);
  // What zod's parse gives back, from the schema's compiled functions where they apply (fast-check.ts):
  // a stored line already in that shape is kept as it is; anything they refuse goes to zod for its error.
  let data: unknown = rawData;
  if (!(stored && checked)) {
    const compiled = compiledOf(type);
    if (!(stored && compiled?.check(rawData))) {
      const out = compiled ? compiled.parse(rawData) : FAILED;
      if (out !== FAILED) data = out;
      else {
        const parsed = schema.safeParse(rawData);
        if (!parsed.success) throw new SessionRuleError('invalid-data', formatZodIssues(type, parsed.error.issues));
        data = parsed.data;
      }
    }
  }
  if (!stored) {
    if (type === 'request/header') normaliseTools(data as { tools: Record<string, unknown>[] });
    // Before anything is committed: what memory holds is what every store reads back.
    data = storable(data, `${type} data`);
  }
  // Checked here, not only on replay: a shape accepted live but refused by StoredEventSchema
  // would make the session file impossible to reopen.
  let surfaceOp: SurfaceOp | undefined;
  if (stored) surfaceOp = rawSurfaceOp as SurfaceOp | undefined;
  else if (rawSurfaceOp !== undefined) {
    const op = SurfaceOpSchema.safeParse(rawSurfaceOp);
    if (!op.success) {
      throw new SessionRuleError(
        'surface-op-shape',
        `surfaceOp must be 'append' or {op: 'replace', start, end} with seqs ≥ 0 and no other keys; got ${JSON.stringify(rawSurfaceOp)}.`,
      );
    }
    surfaceOp = storable(op.data, 'surfaceOp');
  }
  let sourceEventSeqs: readonly number[] | undefined;
  if (stored) sourceEventSeqs = rawSourceEventSeqs as readonly number[] | undefined;
  else if (rawSourceEventSeqs !== undefined) {
    const seqs = SourceSeqsSchema.safeParse(rawSourceEventSeqs);
    if (!seqs.success)
      throw new SessionRuleError('source-seqs', `sourceEventSeqs must be an array of seqs (integers ≥ 0); got ${JSON.stringify(rawSourceEventSeqs)}.`);
    sourceEventSeqs = storable(seqs.data, 'sourceEventSeqs');
  }
  checkProvenance(seq, type, surfaceOp, sourceEventSeqs);
  if (isSurfaceType(type) && surfaceOp === undefined) {
    throw new SessionRuleError('missing-surface-op', `${type} is a surface event and must carry surfaceOp ('append' or a replace).`);
  }
  return { type, data, surfaceOp, sourceEventSeqs };
}

function checkProvenance(seq: number, type: EventType, surfaceOp: SurfaceOp | undefined, sourceEventSeqs: readonly number[] | undefined): void {
  if (!isSurfaceType(type)) {
    if (surfaceOp !== undefined || sourceEventSeqs !== undefined) {
      throw new SessionRuleError('log-only-event', `${type} is a log-only event: it carries neither surfaceOp nor sourceEventSeqs.`);
    }
    return;
  }
  if (sourceEventSeqs === undefined) return;
  if (sourceEventSeqs.length === 0 && type !== 'assistant/message') {
    throw new SessionRuleError('source-seqs', `sourceEventSeqs of ${type} must not be empty (only an assistant/message may say [] for a known empty stream).`);
  }
  const seen = new Set<number>();
  for (const s of sourceEventSeqs) {
    if (!Number.isInteger(s) || s < 0 || s >= seq) {
      throw new SessionRuleError('source-seqs', `sourceEventSeqs entry ${s} must be an earlier seq (0..${seq - 1}).`);
    }
    if (seen.has(s)) throw new SessionRuleError('source-seqs', `sourceEventSeqs names seq ${s} twice.`);
    seen.add(s);
  }
}
