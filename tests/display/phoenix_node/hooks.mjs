// Module hooks that let node import phoenix-event-display's compiled ES modules as they are
// published for bundlers: specifiers without extensions, a package without "type": "module",
// JSON fonts, and `import * as _ from 'lodash'` (a CommonJS module whose names node cannot see).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (specifier.startsWith('.') || specifier.startsWith('/')) {
      for (const tail of ['.js', '/index.js']) {
        try {
          return await next(specifier + tail, context);
        } catch {
          // try the next form
        }
      }
    }
    throw err;
  }
}

export async function load(url, context, next) {
  if (url.startsWith('file:') && url.endsWith('.json')) {
    const text = await readFile(fileURLToPath(url), 'utf8');
    return { format: 'module', source: `export default ${text};`, shortCircuit: true };
  }
  if (url.startsWith('file:') && url.endsWith('/node_modules/lodash/lodash.js')) {
    const path = fileURLToPath(url);
    const names = Object.keys(createRequire(path)(path)).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n));
    const source = `import { createRequire } from 'node:module';
const lodash = createRequire(${JSON.stringify(path)})(${JSON.stringify(path)});
export default lodash;
${names.map((n) => `export const ${n} = lodash.${n};`).join('\n')}`;
    return { format: 'module', source, shortCircuit: true };
  }
  if (url.startsWith('file:') && url.endsWith('.css')) {
    return { format: 'module', source: 'export default "";', shortCircuit: true };
  }
  if (url.includes('/phoenix-event-display/dist/') && url.endsWith('.js')) {
    return next(url, { ...context, format: 'module' });
  }
  return next(url, context);
}
