// The console's build (docs/console.md): console/ → dist/console/, every asset under assets/ with a
// content hash in its name, so that the server can let browsers keep them for a year (http/console.ts).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/console/',
  // Preact's JSX through Vite's own transform: no plugin needed.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/console/', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    // Inline nothing: every asset is a file of its own (the Content-Security-Policy allows no inline
    // script or style, and only data: images).
    assetsInlineLimit: 0,
    // Browsers that support ES modules natively: no polyfill injected into the page.
    modulePreload: { polyfill: false },
    target: 'es2022',
    reportCompressedSize: false,
  },
});
