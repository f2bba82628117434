import { PI_FIXTURE } from '../../helpers/pi-data';
import { beforeAll, describe, expect, it } from 'vitest';
import { frameCheckpoint } from '../../../src/services/summarizing';
import { SummarizerError, type SummaryRequest } from '../../../src/services/summarizing';
import { ExtractiveSummarizer, parseSummary } from '../../../src/services/summarizing';
import { SUMMARY_SECTIONS } from '../../../src/services/summarizing';
import { parseLedger, userMessage } from '../../../src/services/summarizing';
import { COMPACTION_CHECKPOINT_SOURCE, type SessionEvent } from '../../../src/session/events';
import { importPiFile } from '../../../src/transcripts/pi';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { countO200k as count, spanRequest } from '../../helpers/summary-request';

const PI = PI_FIXTURE;
const signal = () => new AbortController().signal;

function headings(text: string): string[] {
  return [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);
}

/** A section of the prose; the ledger blocks after the last section are not part of it. */
function section(full: string, name: string): string {
  const text = parseLedger(full).body;
  const start = text.indexOf(`## ${name}\n`);
  const next = text.indexOf('\n## ', start + 1);
  return text.slice(start + name.length + 4, next < 0 ? undefined : next);
}

describe('ExtractiveSummarizer on a real transcript', () => {
  let session: Session;
  let end: number;

  beforeAll(async () => {
    session = Session.inMemory();
    await importPiFile(session, PI, { systemPrompt: 'You are pi.' });
    // The first balanced cut after 300 surface nodes.
    end = session.balancedCuts().find((c) => c >= 300)!;
  });

  it('fills the eight sections in order with the span’s requests, files, errors and commands, within the budget', async () => {
    const request = spanRequest(session, end, 4_000);
    const result = await new ExtractiveSummarizer().summarize(request, signal());
    const text = result.text;

    expect(headings(text)).toEqual([...SUMMARY_SECTIONS]);
    expect(count(text)).toBeLessThanOrEqual(4_000);
    expect(result).toMatchObject({ requests: 0 });
    expect(result.usage).toBeUndefined();

    // Paths that the transcript's tool calls really touched: in the ledger, not restated in the prose.
    const files = section(text, 'Files and Code');
    const { ledger } = parseLedger(text);
    for (const path of ['packages/coding-agent/src/tui/tui-renderer.ts', 'packages/tui/test/markdown.test.ts']) {
      expect([...ledger.read, ...ledger.modified]).toContain(path);
      expect(files).not.toContain(`\`${path}\`: `);
    }
    expect(files).toMatch(/^- `[^`]+`: /m);
    // The newest user request of the span is kept verbatim, last, in the ledger (not restated in the prose).
    const users = request.events.filter((e) => e.type === 'user/message');
    const newest = (users.at(-1) as SessionEvent<'user/message'>).data.content[0]!;
    expect(newest.type === 'text' && ledger.requests.at(-1) === userMessage(newest.text)).toBe(true);
    expect(newest.type === 'text' && section(text, 'Primary Request and Intent').includes(newest.text.trim().split('\n').join('\n  '))).toBe(false);
    // Commands from the bash tool's `command` argument, and errors from failed/command results.
    expect(section(text, 'Critical Context')).toMatch(/^- Ran `cd packages\/coding-agent && npm run check/m);
    expect([section(text, 'Errors and Fixes'), ...parseLedger(text).ledger.errors.map((e) => e.line)].join('\n')).toMatch(/error TS\d+/m);
    expect(section(text, 'Key Technical Concepts')).toMatch(/^- Tools used: `bash` ×\d+, `edit` ×\d+, `read` ×\d+/m);
    // The latest assistant text is the current work.
    const lastAssistantText = [...request.events]
      .reverse()
      .flatMap((e) => (e.type === 'assistant/message' ? e.data.content.filter((b) => b.type === 'text') : []))[0];
    expect(section(text, 'Current Work')).toContain(lastAssistantText?.type === 'text' ? lastAssistantText.text.trim().split('\n')[0] : '∅');
  });

  it('is deterministic: the same span gives the same bytes, also from a fresh import', async () => {
    const a = await new ExtractiveSummarizer().summarize(spanRequest(session, end, 3_000), signal());
    const b = await new ExtractiveSummarizer().summarize(spanRequest(session, end, 3_000), signal());
    const other = Session.inMemory();
    await importPiFile(other, PI, { systemPrompt: 'You are pi.' });
    const c = await new ExtractiveSummarizer().summarize(spanRequest(other, end, 3_000), signal());
    expect(b.text).toBe(a.text);
    expect(c.text).toBe(a.text);
  });

  it('trims the oldest entries first under a small budget and says how many it left out', async () => {
    const full = await new ExtractiveSummarizer().summarize(spanRequest(session, session.surface.length, 100_000), signal());
    const small = await new ExtractiveSummarizer().summarize(spanRequest(session, session.surface.length, 600), signal());
    expect(count(small.text)).toBeLessThanOrEqual(600);
    expect(headings(small.text)).toEqual([...SUMMARY_SECTIONS]);
    expect(small.text).toMatch(/^- \(\d+ earlier entries omitted\)$/m);
    // What survives of a trimmed section is its newest entries, whole (or the head of the last one).
    const fullCommands = section(full.text, 'Critical Context').trim().split('\n');
    const smallCommands = section(small.text, 'Critical Context')
      .trim()
      .split('\n')
      .filter((l) => !l.includes('earlier entries omitted'));
    expect(smallCommands.length).toBeLessThan(fullCommands.length);
    const kept = smallCommands.filter((l) => !l.endsWith(' …'));
    expect(fullCommands.slice(fullCommands.length - kept.length)).toEqual(kept);
  });

  it('over the whole transcript stays within budgets from tiny to large', async () => {
    for (const budget of [200, 1_000, 8_000]) {
      const r = await new ExtractiveSummarizer().summarize(spanRequest(session, session.surface.length, budget), signal());
      expect(count(r.text), `budget ${budget}`).toBeLessThanOrEqual(budget);
      expect(headings(r.text)).toEqual([...SUMMARY_SECTIONS]);
    }
  });
});

describe('ExtractiveSummarizer rules', () => {
  function small(build: (w: SessionWriter) => void, maxTokens = 2_000): SummaryRequest {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'p', model: 'm', systemPrompt: 'sys' });
    build(w);
    return spanRequest(session, session.surface.length, maxTokens);
  }

  it('merges a prior checkpoint in the span: its bullets first, de-duplicated, never quoted as a user request', async () => {
    const prior = [
      '## Primary Request and Intent',
      '- Port the selectors to the theme system',
      '- Keep `chalk` out of src/',
      '',
      '## Key Technical Concepts',
      '(none)',
      '',
      '## Files and Code',
      '- `src/theme.ts`: the tokens',
      '',
      '## Pending Jobs',
      '- Port user-message-selector.ts',
    ].join('\n');
    const request = small((w) => {
      w.user(frameCheckpoint(prior), COMPACTION_CHECKPOINT_SOURCE);
      w.user('Keep `chalk` out of src/');
      w.assistant({ text: 'Porting now.' });
      w.user('Now fix src/tui/editor.ts too');
    });
    const { text } = await new ExtractiveSummarizer().summarize(request, signal());
    // The user's own words are in the ledger, verbatim; the prose keeps the prior summary's other bullets.
    expect(section(text, 'Primary Request and Intent')).toBe('- Port the selectors to the theme system\n');
    expect(parseLedger(text).ledger.requests).toEqual(['Keep `chalk` out of src/', 'Now fix src/tui/editor.ts too']);
    expect(section(text, 'Files and Code')).toBe('- `src/theme.ts`: the tokens\n- `src/tui/editor.ts`: mentioned\n');
    expect(section(text, 'Pending Jobs')).toBe('- Port user-message-selector.ts\n');
    expect(section(text, 'Key Technical Concepts')).toBe('(none)\n');
    expect(text).not.toContain('automatically generated checkpoint');
    expect(section(text, 'Next Step')).toBe('- Continue with the most recent user request: "Now fix src/tui/editor.ts too"\n');
  });

  it('reads errors from failed results and command output, paths from arguments, commands verbatim', async () => {
    const request = small((w) => {
      w.user('Run the tests');
      w.assistant({
        toolCalls: [
          { id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'npx vitest run test/parse.test.ts' }) },
          { id: 'c2', name: 'read', arguments: JSON.stringify({ path: 'src/parse.ts' }) },
          { id: 'c3', name: 'edit', arguments: JSON.stringify({ path: 'src/parse.ts', oldText: 'a', newText: 'b' }) },
        ],
      });
      w.toolResult('c1', 'RUN v4\n FAIL test/parse.test.ts > splits\nAssertionError: expected 2, got 3', { toolName: 'bash' });
      w.toolResult('c2', '// throw new Error("never") — code, not an error report\nexport const x = 1;', { toolName: 'read' });
      w.toolResult('c3', 'Could not find the exact text in src/parse.ts', { toolName: 'edit', isError: true });
    });
    const { text } = await new ExtractiveSummarizer().summarize(request, signal());
    // Each fact once: the ledger lists the errors and the edited file, the prose the rest.
    expect(parseLedger(text).ledger).toEqual({
      requests: ['Run the tests'],
      read: [],
      modified: ['src/parse.ts'],
      commands: ['npx vitest run test/parse.test.ts'],
      errors: [
        { target: 'bash npx vitest run test/parse.test.ts', line: 'FAIL test/parse.test.ts > splits' },
        { target: 'edit src/parse.ts', line: 'Could not find the exact text in src/parse.ts' },
      ],
    });
    expect(section(text, 'Errors and Fixes')).toBe('(none)\n');
    expect(section(text, 'Files and Code')).toBe('- `test/parse.test.ts`: bash\n');
    // Without a ledger the prose says it all.
    const bare = (await new ExtractiveSummarizer({ ledger: 'none' }).summarize(request, signal())).text;
    expect(section(bare, 'Errors and Fixes')).toBe('- `bash`: FAIL test/parse.test.ts > splits\n- `edit`: Could not find the exact text in src/parse.ts\n');
    expect(section(bare, 'Files and Code')).toBe('- `test/parse.test.ts`: bash\n- `src/parse.ts`: read, edit\n');
    expect(section(text, 'Critical Context')).toBe('- Ran `npx vitest run test/parse.test.ts`');
    expect(section(text, 'Key Technical Concepts')).toBe('- Tools used: `bash` ×1, `edit` ×1, `read` ×1\n');
  });

  it('keeps the head of a single over-long entry', async () => {
    const long = Array.from({ length: 3_000 }, (_, i) => `word${i}`).join(' ');
    const request = small((w) => w.user(long), 300);
    const { text } = await new ExtractiveSummarizer().summarize(request, signal());
    expect(count(text)).toBeLessThanOrEqual(300);
    const primary = section(text, 'Primary Request and Intent');
    expect(primary.startsWith('- word0 word1 word2')).toBe(true);
    expect(primary.trimEnd().endsWith(' …')).toBe(true);
  });

  it('works from messages alone when no events are given', async () => {
    const request = small((w) => {
      w.user('Rename src/a.ts to src/b.ts');
      w.assistant({ toolCalls: [{ id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'git mv src/a.ts src/b.ts' }) }] });
      w.toolResult('c1', '');
      w.assistant({ text: 'Renamed.' });
    });
    // The ledger is derived from events: compared without it.
    const fromEvents = await new ExtractiveSummarizer({ ledger: 'none' }).summarize(request, signal());
    const fromMessages = await new ExtractiveSummarizer({ ledger: 'none' }).summarize({ ...request, events: [] }, signal());
    expect(fromMessages.text).toBe(fromEvents.text);
    expect(section(fromMessages.text, 'Current Work')).toBe('- Renamed.\n');
  });

  it('writes (none) for empty sections', async () => {
    const { text } = await new ExtractiveSummarizer().summarize(
      small((w) => w.user('hi')),
      signal(),
    );
    expect(text).toBe(
      [
        '## Primary Request and Intent\n(none)',
        '## Key Technical Concepts\n(none)',
        '## Files and Code\n(none)',
        '## Errors and Fixes\n(none)',
        '## Pending Jobs\n(none)',
        '## Current Work\n(none)',
        '## Next Step\n- Continue with the most recent user request: "hi"',
        '## Critical Context\n(none)',
        '<user-messages>\n<message>hi</message>\n</user-messages>',
      ].join('\n\n'),
    );
  });

  it('rejects a budget too small for the headings, and an aborted signal', async () => {
    const request = small((w) => w.user('hi'), 20);
    const tiny = await new ExtractiveSummarizer().summarize(request, signal()).catch((e: unknown) => e);
    expect(tiny).toBeInstanceOf(SummarizerError);
    expect((tiny as SummarizerError).code).toBe('summary-truncated');

    const controller = new AbortController();
    controller.abort();
    const cancelled = await new ExtractiveSummarizer()
      .summarize(
        small((w) => w.user('hi')),
        controller.signal,
      )
      .catch((e: unknown) => e);
    expect((cancelled as SummarizerError).code).toBe('summary-cancelled');
  });

  it('parses a model-written summary into section entries', () => {
    const parsed = parseSummary('## Files and Code\n- `a.ts`: x\n  continued\n- (none)\n\n## Current Work\nprose line\n## Unknown\n- dropped');
    expect(parsed['Files and Code']).toEqual(['- `a.ts`: x\n  continued']);
    expect(parsed['Current Work']).toEqual(['- prose line']);
    expect(Object.values(parsed).flat()).not.toContain('- dropped');
  });
});
