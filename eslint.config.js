// ESLint: typescript-eslint's recommended type-checked rules over the TypeScript sources.
// `npm run lint` fails on any warning. Formatting is prettier's job (`npm run format:check`).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'visualizer/out/**', 'coverage/**', '**/*.js', '**/*.cjs', '**/*.mjs'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // An implementation of an async interface (a summarizer, a store) may have nothing to await:
      // `async` keeps its errors as rejections, which is what its callers handle.
      '@typescript-eslint/require-await': 'off',
      // `_`-prefixed names are deliberately unused (a parameter kept for its position).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
);
