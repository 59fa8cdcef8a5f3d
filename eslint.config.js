// Lint rules that carry the architecture: ctl and the agent meet the control
// plane only through src/api and src/protocol, the gateway never imports the
// control plane (it owns its ports), a route declares what it reads in zod,
// and no promise is left floating.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'test-artifacts/**', 'bin/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Plain JavaScript (benchmarks, small test launchers) runs on Node.
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: globals.node },
  },
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // One way to validate (issue #34): a route declares its body, query and path as zod schemas, which Fastify checks
    // before the handler. A route typed through Fastify's generics is a cast: nothing checks the request against it.
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            'CallExpression[callee.property.name=/^(get|post|put|patch|delete|head|options|route)$/][typeArguments]',
          message:
            "declare the route's body, querystring and params as zod schemas in its `schema` (withTypeProvider<ZodTypeProvider>()), not as type arguments nothing checks.",
        },
      ],
    },
  },
  {
    files: ['src/ctl/**/*.ts', 'src/api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/control/**', '**/agent/**'],
              message:
                'ctl and the api client reach the control plane only over HTTP (src/api) and share types through src/protocol.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/agent/**/*.ts', 'src/engine/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/control/**'],
              message: 'the agent never imports the control plane; shared wire types live in src/protocol.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/gateway/**/*.ts'],
    ignores: ['src/gateway/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/control/**', '**/agent/**', '**/ctl/**', '**/cli/**'],
              message:
                'the gateway imports nothing of the control plane: what it needs from outside is an interface in src/gateway/ports/index.ts, which the control plane implements.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/protocol/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/control/**', '**/agent/**', '**/ctl/**'],
              message: 'src/protocol is shared by both sides and depends on neither.',
            },
          ],
        },
      ],
    },
  },
);
