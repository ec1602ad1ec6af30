// ESLint for the notebook extension (flat config): typescript-eslint's type-checked recommended
// rules over src/; formatting is prettier's (`npm run format:check`), so eslint-config-prettier
// turns off the rules that would argue with it.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'lib/', 'labextension/'] },
  js.configs.recommended,
  {
    files: ['src/**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      globals: globals.browser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname }
    },
    rules: {
      eqeqeq: 'error',
      curly: 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // Lumino's `signal.connect(this.method, this)` passes the method with its `this`, which the
      // rule cannot see; every slot here is connected (and disconnected) that way.
      '@typescript-eslint/unbound-method': 'off'
    }
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node }
  },
  prettier
);
