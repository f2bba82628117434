/**
 * The compaction instruction: the one user message appended after the replayed conversation
 * that asks the model for the checkpoint. The base text is the reference system's, verbatim
 * (docs/spec.md#8-the-summarizer); xcompact adds two optional paragraphs after it, so the base (and everything the
 * provider caches before it) stays the same whatever the options.
 */

/** The eight sections of a checkpoint, in order. The extractive summarizer fills the same ones. */
export const SUMMARY_SECTIONS = [
  'Primary Request and Intent',
  'Key Technical Concepts',
  'Files and Code',
  'Errors and Fixes',
  'Pending Jobs',
  'Current Work',
  'Next Step',
  'Critical Context',
] as const;

export type SummarySection = (typeof SUMMARY_SECTIONS)[number];

/** The reference's instruction, word for word. */
export const COMPACTION_INSTRUCTION = `You are now acting as a compaction engine for this AI coding assistant. Condense the conversation ABOVE into a structured checkpoint that lets another model resume the work with no loss of essential context.

Output EXACTLY the Markdown structure below: keep every section, in order. Use terse bullets, not prose paragraphs. Write "(none)" for an empty section — never drop a section.

## Primary Request and Intent
- [the user's original and evolving goals; quote verbatim where the exact wording matters]

## Key Technical Concepts
- [technologies, frameworks, patterns, and conventions in play]

## Files and Code
- [exact path: why it matters, key changes or snippets]

## Errors and Fixes
- [error: how it was resolved, plus any related user feedback]

## Pending Jobs
- [explicitly requested work not yet completed]

## Current Work
- [precisely what was in progress at this checkpoint]

## Next Step
- [the single next action, directly in line with the most recent request, or "(none)"]

## Critical Context
- [decisions and their rationale, constraints, user preferences, open questions, data needed to continue]

Rules:
- Write concise English engineering prose. Preserve exact file paths, commands, error strings, identifiers, numeric values, function signatures, and syntax fragments.
- Capture user feedback and explicit instructions faithfully, especially corrections.
- Do NOT mention this summarization request or that the context was compacted.
- Output only the checkpoint text: do not call any tool or take any other action.
- If the conversation already contains a <compacted-summary> block, it is a PRIOR checkpoint. Do not copy it forward verbatim: preserve still-true facts, drop stale ones, and merge newer information into a single consolidated summary under the same structure.`;

export interface InstructionOptions {
  /**
   * How many messages right after the system prompt are earlier checkpoints that stay in the
   * conversation unchanged (`SummaryRequest.context`). 0 or absent adds nothing.
   */
  keptCheckpoints?: number;
  /** What the user asked the checkpoint to focus on (`/compact <focus>`). Blank adds nothing. */
  focus?: string;
}

/**
 * The instruction for one summary request. Without options it is exactly
 * {@link COMPACTION_INSTRUCTION}.
 *
 * The kept-checkpoints paragraph exists because the base rule says to merge *any*
 * `<compacted-summary>` in the conversation; when earlier checkpoints are replayed only to keep
 * the request a prefix of the conversation (warm cache), merging them would copy them into
 * the new checkpoint while they also stay on the surface: the model would read them twice.
 */
export function buildInstruction(options: InstructionOptions = {}): string {
  const parts: string[] = [COMPACTION_INSTRUCTION];
  const kept = options.keptCheckpoints ?? 0;
  if (kept > 0) {
    const which = kept === 1 ? 'The first message' : `The first ${kept} messages`;
    const verb = kept === 1 ? 'is an earlier checkpoint' : 'are earlier checkpoints';
    const them = kept === 1 ? 'it' : 'them';
    parts.push(
      `${which} after the system prompt ${verb} (<compacted-summary> blocks) that stay in the conversation exactly as they are. ` +
        `Use ${them} only as background: do not summarize, merge or repeat ${them}. ` +
        `Condense only the messages that follow ${them}; the rule about merging a prior checkpoint applies only to a <compacted-summary> block among those messages.`,
    );
  }
  const focus = options.focus?.trim();
  if (focus) {
    parts.push(
      `Focus: the user asked this checkpoint to focus on the following. Give it priority and more detail in every section where it applies, while keeping every section:\n${focus}`,
    );
  }
  return parts.join('\n\n');
}
