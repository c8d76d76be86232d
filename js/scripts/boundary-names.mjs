// The names on the boundary between the .wasm and its glue, made short.
// wasm-bindgen names every import after the JS it calls plus a 16-digit
// hash (`__wbg_create_1865c4143a9df755`), every export after its Rust item
// (`wasm_bindgen__convert__closures_____invoke__h60702a48838d1764`), and
// files all imports under "./<name>_bg.js". Those strings are some 4 KB
// of each module and, being hashes, barely compress: about 2 KB of its
// gzip size. Here they become one- or two-letter names in the module and
// in the glue, which wasm-bindgen has no option to do itself. `memory`
// keeps its name: initSync() hands the exports to callers, who may read
// it (the typings' InitOutput lists the others under their new names).

const LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/** The `n`th short name: a..Z, then aa, ab, ... */
function shortName(n) {
  let name = "";
  let k = n;
  for (;;) {
    name = LETTERS[k % LETTERS.length] + name;
    k = Math.floor(k / LETTERS.length);
    if (k === 0) return name;
    k -= 1;
  }
}

class Reader {
  constructor(bytes, at = 0) {
    this.bytes = bytes;
    this.at = at;
  }
  byte() {
    if (this.at >= this.bytes.length) throw new Error("boundary-names: the module ends early");
    return this.bytes[this.at++];
  }
  u32() {
    let value = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
      shift += 7;
    }
  }
  name() {
    const length = this.u32();
    const start = this.at;
    this.at += length;
    return new TextDecoder("utf-8", { fatal: true }).decode(this.bytes.subarray(start, this.at));
  }
  // What an import brings in, after its names: kept as it is.
  importDescription() {
    const start = this.at;
    const kind = this.byte();
    const limits = () => {
      const flags = this.byte();
      this.u32();
      if (flags & 1) this.u32();
    };
    if (kind === 0) this.u32();
    else if (kind === 1) {
      this.byte();
      limits();
    } else if (kind === 2) limits();
    else if (kind === 3) {
      this.byte();
      this.byte();
    } else if (kind === 4) {
      this.byte();
      this.u32();
    } else throw new Error(`boundary-names: an import of unknown kind ${kind}`);
    return this.bytes.subarray(start, this.at);
  }
}

function u32Bytes(value) {
  const out = [];
  let v = value;
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v > 0) b |= 0x80;
    out.push(b);
  } while (v > 0);
  return out;
}

function nameBytes(name) {
  const utf8 = new TextEncoder().encode(name);
  return [...u32Bytes(utf8.length), ...utf8];
}

/**
 * The module `bytes` with short import and export names: the new bytes,
 * the import module's old and new names, and Maps from each import's and
 * export's old name to its new one.
 */
export function shortenBoundaryNames(bytes) {
  const r = new Reader(bytes, 8);
  const pieces = [bytes.subarray(0, 8)];
  const imports = new Map();
  const exports = new Map();
  const module = { from: null, to: "a" };
  while (r.at < bytes.length) {
    const sectionStart = r.at;
    const id = r.byte();
    const size = r.u32();
    const start = r.at;
    const end = start + size;
    let body = null;
    if (id === 2) {
      const count = r.u32();
      body = u32Bytes(count);
      for (let i = 0; i < count; i++) {
        const from = r.name();
        if (module.from !== null && from !== module.from) {
          throw new Error(`boundary-names: imports from ${module.from} and ${from}; the glue gives one object`);
        }
        module.from = from;
        const field = r.name();
        const to = shortName(i);
        imports.set(field, to);
        body.push(...nameBytes(module.to), ...nameBytes(to), ...r.importDescription());
      }
    } else if (id === 7) {
      const count = r.u32();
      body = u32Bytes(count);
      for (let i = 0; i < count; i++) {
        const from = r.name();
        const kind = r.byte();
        const index = r.u32();
        const to = from === "memory" ? from : shortName(i);
        exports.set(from, to);
        body.push(...nameBytes(to), kind, ...u32Bytes(index));
      }
    }
    if (body !== null && r.at !== end) throw new Error(`boundary-names: section ${id} is not what it says`);
    r.at = end;
    if (body === null) pieces.push(bytes.subarray(sectionStart, end));
    else pieces.push(Uint8Array.from([id, ...u32Bytes(body.length), ...body]));
  }
  if (module.from === null) throw new Error("boundary-names: the module imports nothing");
  return { bytes: Buffer.concat(pieces), module, imports, exports };
}

function replaceExactlyOnce(text, pattern, to, what) {
  const found = text.match(new RegExp(pattern.source, `${pattern.flags}g`))?.length ?? 0;
  if (found !== 1) throw new Error(`boundary-names: expected ${what} once in the glue, found it ${found} times`);
  return text.replace(pattern, to);
}

const literal = (name) => name.replace(/[$.]/g, "\\$&");

/**
 * The generated glue with the module's new names: the key its imports
 * object files them under, each import's key in it, and every
 * `wasm.<export>` it reads.
 */
export function renameGlue(source, names) {
  let out = replaceExactlyOnce(
    source,
    new RegExp(`"${literal(names.module.from)}": import0`),
    `"${names.module.to}": import0`,
    names.module.from,
  );
  for (const [from, to] of names.imports) {
    out = replaceExactlyOnce(out, new RegExp(`^( {8})${literal(from)}: function`, "m"), `$1${to}: function`, from);
  }
  return out.replace(/\bwasm\.([A-Za-z_$][\w$]*)/g, (_, name) => {
    const to = names.exports.get(name);
    if (to === undefined)
      throw new Error(`boundary-names: the glue reads wasm.${name}, which the module does not export`);
    return `wasm.${to}`;
  });
}

function renameMembers(text, pattern, names, where) {
  return text.replace(pattern, (_, head, name) => {
    const to = names.exports.get(name);
    if (to === undefined) throw new Error(`boundary-names: ${where} names ${name}, which the module does not export`);
    return `${head}${to}:`;
  });
}

/**
 * The raw module's typings (`<name>_bg.wasm.d.ts`) with the new export
 * names. They leave out wasm-bindgen's runtime globals, so not every
 * export is in them.
 */
export function renameWasmTypings(source, names) {
  return renameMembers(source, /^(export const )([\w$]+):/gm, names, "the raw module's typings");
}

/** The glue's typings with InitOutput (what initSync returns) under the new export names. */
export function renameInitOutput(source, names) {
  const head = "export interface InitOutput {\n";
  const start = source.indexOf(head);
  const end = source.indexOf("\n}\n", start);
  if (start < 0 || end < 0) throw new Error("boundary-names: the typings have no InitOutput interface");
  const members = renameMembers(source.slice(start, end), /^( {4}readonly )([\w$]+):/gm, names, "InitOutput");
  return source.slice(0, start) + members + source.slice(end);
}
