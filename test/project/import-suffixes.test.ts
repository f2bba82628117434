/**
 * scripts/fix-import-suffixes.ts, the codemod for the one import-suffix convention (relative
 * imports of TypeScript sources carry no `.js`): what it changes, what it leaves, idempotent.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixText } from '../../scripts/fix-import-suffixes';
import { ROOT } from '../helpers/cli';

describe('fix-import-suffixes', () => {
  const file = join(ROOT, 'src', 'example.ts');

  it('drops .js from relative specifiers of TypeScript files, in every form an import takes', () => {
    const text = [
      "import { Session } from './session/session.js';",
      "import type { Usage } from './session/index.js';",
      "export { parseConfig } from './services/config/index.js';",
      "const m = await import('./errors.js');",
      "type T = import('./trace.js').TraceRecord;",
      // Split so the suite plan's search for files that mock a module does not take this text for one.
      'vi' + ".mock('./errors.js');",
      '',
    ].join('\n');
    const { text: out, count } = fixText(file, text);
    expect(count).toBe(6);
    expect(out).not.toMatch(/\.js'/);
    expect(out).toContain("from './session/session';");
    expect(out).toContain("import('./trace').TraceRecord");
    expect(fixText(file, out)).toEqual({ text: out, count: 0 });
  });

  it('leaves packages, real JavaScript files, missing files and strings that only look like imports', () => {
    const text = [
      "import OpenAI from 'openai';",
      "import { x } from '../visualizer/layout.js';",
      "import { y } from './no-such-file.js';",
      'const s = "from \'./errors.js\'";',
      '',
    ].join('\n');
    expect(fixText(file, text)).toEqual({ text, count: 0 });
  });
});
