import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Node's globals for the plain JavaScript files (bin/, bench/); TypeScript checks its own files.
const nodeGlobals = Object.fromEntries(
  [
    'process',
    'console',
    'URL',
    'URLSearchParams',
    'Buffer',
    'fetch',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'TextDecoder',
    'TextEncoder',
    'performance',
    'crypto',
  ].map((name) => [name, 'readonly']),
);

export default tseslint.config(
  // The comparison workload and calibration are verbatim copies of files shared with other servers' runs.
  {
    ignores: [
      'node_modules/',
      'dist/',
      'generated/',
      'data/',
      'coverage/',
      'bench/out/',
      'bench/workload.mjs',
      'bench/calibrate.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: nodeGlobals },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  { files: ['**/*.ts'], rules: { 'no-undef': 'off' } },
  // Functions a reader can hold in mind: none over 120 lines in the product's code (tests describe
  // suites in one function, by design).
  {
    files: ['src/**/*.ts', 'console/src/**/*.ts', 'console/src/**/*.tsx'],
    ignores: ['src/**/*.test.ts', 'console/src/**/*.test.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 120 }] },
  },
  // No getters or setters in object literals in the server: V8 keeps what such a literal's accessors
  // close over alive through young collections until the next full one. Made per request, that promoted
  // every request's objects (docs/benchmarks.md, "What stands in the way"). A class's accessors live on
  // its prototype.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ObjectExpression > Property[kind=/^(get|set)$/]',
          message: 'An accessor in an object literal keeps what it closes over alive until a full GC: use a class.',
        },
      ],
    },
  },
);
