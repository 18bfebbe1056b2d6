// Build one event of a Phoenix event-data file with Phoenix's own loader (PhoenixLoader) and
// describe every three.js object it makes, as JSON on stdout.
//
//   node build.mjs <directory holding node_modules> <event file.json>
//
// The loader's graphics library and menus are stand-ins that keep what the loader hands them;
// everything else (object builders, track extrapolation, three.js geometry) is Phoenix's own.
import { createRequire, register } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, eventFile] = process.argv.slice(2);
const require = createRequire(join(modules, 'package.json'));
const { JSDOM } = require('jsdom');

// Phoenix's menus (dat.gui) touch the DOM when imported; the object builders do not need it.
const dom = new JSDOM('<!doctype html><html><body></body></html>', { pretendToBeVisual: true, url: 'http://localhost/' });
for (const key of ['window', 'document', 'navigator', 'HTMLElement', 'Element', 'Node', 'getComputedStyle',
  'requestAnimationFrame', 'cancelAnimationFrame', 'localStorage', 'HTMLCanvasElement', 'Image']) {
  Object.defineProperty(globalThis, key, { value: dom.window[key], configurable: true, writable: true });
}
// getHits assigns to an undeclared `length`, which a browser resolves to window.length.
globalThis.length = 0;
register('./hooks.mjs', import.meta.url);

const dist = join(modules, 'node_modules', 'phoenix-event-display', 'dist');
const { PhoenixLoader } = await import(pathToFileURL(join(dist, 'loaders', 'phoenix-loader.js')).href);
const { Group } = await import(pathToFileURL(join(modules, 'node_modules', 'three', 'build', 'three.module.js')).href);

// The loader logs every collection it adds; keep stdout for the answer.
console.log = (...args) => process.stderr.write(args.join(' ') + '\n');

const scene = new Group();
const cuts = {};
const graphics = {
  addEventDataTypeGroup(name) {
    const group = new Group();
    group.name = name;
    scene.add(group);
    return group;
  },
  getSceneManager() {
    return {};
  },
};
const ui = {
  addEventDataTypeFolder() {},
  addCollection(type, collection, collectionCuts) {
    cuts[`${type}/${collection}`] = (collectionCuts ?? []).map((c) => c.field);
  },
  getUIMenus() {
    return [];
  },
};

function finite(object) {
  let ok = true;
  object.traverse((o) => {
    if (!o.matrixWorld.elements.every(Number.isFinite)) ok = false;
    const pos = o.geometry?.attributes?.position?.array;
    if (pos && (pos.length === 0 || !pos.every(Number.isFinite))) ok = false;
  });
  return ok;
}

function describe(object) {
  const V = object.position.constructor;
  const out = { name: object.name, type: object.type, finite: finite(object) };
  out.position = object.getWorldPosition(new V()).toArray();
  if (object.isMesh && object.geometry?.type === 'CylinderGeometry') {
    out.direction = new V(0, 1, 0).applyQuaternion(object.getWorldQuaternion(object.quaternion.clone())).toArray();
  }
  let line = null;
  let box = null;
  object.traverse((o) => {
    if (!line && o.isLine) line = o;
    if (!box && o.isMesh && o.geometry?.type === 'BoxGeometry') box = o;
  });
  if (line) {
    const a = line.geometry.attributes.position;
    const pts = [];
    for (let i = 0; i < a.count; i++) {
      pts.push(new V().fromBufferAttribute(a, i).applyMatrix4(line.matrixWorld).toArray());
    }
    out.points = pts;
  }
  if (box) out.box = box.getWorldPosition(new V()).toArray();
  if (object.isPoints) out.count = object.geometry.attributes.position.count;
  return out;
}

const data = JSON.parse(readFileSync(eventFile, 'utf8'));
const loader = new PhoenixLoader();
const answer = {};
for (const [key, event] of Object.entries(data)) {
  loader.buildEventData(event, graphics, ui, { add() {} });
  scene.updateMatrixWorld(true);
  const types = {};
  for (const typeGroup of scene.children) {
    types[typeGroup.name] = {};
    for (const coll of typeGroup.children) {
      types[typeGroup.name][coll.name] = coll.children.map(describe);
    }
  }
  const metadata = loader.getEventMetadata();  // what Phoenix shows as "Run / Event"
  answer[key] = { collections: loader.getCollections(), cuts: { ...cuts }, types, metadata };
  scene.clear();
}
process.stdout.write(JSON.stringify(answer));
