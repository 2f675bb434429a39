/**
 * Writes `dist/index.d.ts`: the tRPC router's type (`AgentgovRouter` of `@agentgov/api`) with every
 * procedure's input and output spelt out as plain TypeScript, so that the published package holds no
 * server code, no `.ts` source and no reference to `effect` or to the private packages. Only
 * `@trpc/server`'s router and procedure types stay referenced: a tRPC client needs that package anyway.
 *
 * The types are read from the compiler (TypeScript 6: TypeScript 7 has no compiler API), never written
 * by hand, and the build then checks with the same compiler that the written router and the source's are
 * mutually assignable, procedure by procedure and as a whole: a type this printer cannot render
 * faithfully fails the build instead of being published wrong.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("../", import.meta.url))
const distFile = `${root}dist/index.d.ts`
const entryFile = `${root}scripts/__router.ts`
const checkFile = `${root}scripts/__check.ts`

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2024,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ["lib.es2024.d.ts"],
  types: ["node"],
  strict: true,
  noUncheckedIndexedAccess: true,
  allowImportingTsExtensions: true,
  skipLibCheck: true,
  noEmit: true,
  resolveJsonModule: true,
}

/** In-memory files beside the real ones. */
const host = (virtual: Map<string, string>): ts.CompilerHost => {
  const base = ts.createCompilerHost(options, true)
  return {
    ...base,
    fileExists: (f) => virtual.has(f) || base.fileExists(f),
    readFile: (f) => virtual.get(f) ?? base.readFile(f),
    getSourceFile: (f, lang, onError, create) => {
      const text = virtual.get(f)
      return text === undefined ? base.getSourceFile(f, lang, onError, create) : ts.createSourceFile(f, text, lang)
    },
  }
}

const ENTRY = `import type { AgentgovRouter } from "@agentgov/api"
export type Record = AgentgovRouter["_def"]["record"]
export type Root = AgentgovRouter["_def"]["_config"]["$types"]
`

const fail = (message: string): never => {
  throw new Error(`@agentgov/trpc-types: ${message}`)
}

const diagnosticsText = (diagnostics: ReadonlyArray<ts.Diagnostic>) =>
  ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => root,
    getNewLine: () => "\n",
  })

const program = ts.createProgram([entryFile], options, host(new Map([[entryFile, ENTRY]])))
const entryDiagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(entryFile))
if (entryDiagnostics.length > 0) fail(`the router's type does not resolve:\n${diagnosticsText(entryDiagnostics)}`)
const checker = program.getTypeChecker()
const entry = checker.getSymbolAtLocation(program.getSourceFile(entryFile)!)!
const exported = (name: string) =>
  checker.getDeclaredTypeOfSymbol(checker.getExportsOfModule(entry).find((s) => s.name === name)!)

/** A type met again while it is being printed: it gets a name and a declaration of its own. */
class Recursion extends Error {
  readonly type: ts.Type
  constructor(type: ts.Type) {
    super("recursive type")
    this.type = type
  }
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/
const propertyKey = (name: string) => (IDENTIFIER.test(name) ? name : JSON.stringify(name))

const isReadonly = (symbol: ts.Symbol): boolean => {
  // Mapped types (effect's Struct types) mark readonly properties in the check flags, declarations by a modifier.
  const checkFlags = (ts as any).getCheckFlags?.(symbol) ?? 0
  if (checkFlags & (ts as any).CheckFlags.Readonly) return true
  return (symbol.declarations ?? []).some(
    (d) => ts.getCombinedModifierFlags(d as ts.Declaration) & ts.ModifierFlags.Readonly,
  )
}

/**
 * An interface of the standard library (`Date`, `Uint8Array`, …): referred to by its name, as the consumer has
 * it too. Its type aliases (`Record`, `Partial`) are expanded like any other.
 */
const libName = (type: ts.Type): string | undefined => {
  const symbol = type.getSymbol()
  const declaration = symbol?.declarations?.[0]
  if (!symbol || !declaration || !program.isSourceFileDefaultLibrary(declaration.getSourceFile())) return undefined
  if (!(symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class))) return undefined
  if (symbol.name === "Array" || symbol.name === "ReadonlyArray") return undefined
  return symbol.name
}

/**
 * An interface of the API's own sources. It stays an interface, under its name: tRPC's client types tell JSON
 * apart by assignability to an index signature, which an object literal type has implicitly and an interface
 * has not, so inlining one would change what a client sees.
 */
const isOwnInterface = (type: ts.Type): boolean => {
  const symbol = type.getSymbol()
  if (!symbol || !(symbol.flags & ts.SymbolFlags.Interface)) return false
  return !(symbol.declarations ?? []).some((d) => program.isSourceFileDefaultLibrary(d.getSourceFile()))
}

/** The generic interface a type instantiates, and its arguments (without the implicit `this`). */
const genericTarget = (type: ts.Type): { target: ts.GenericType; args: ReadonlyArray<ts.Type> } | undefined => {
  if (!((type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference)) return undefined
  const target = (type as ts.TypeReference).target
  const parameters = target.typeParameters ?? []
  if (target === type || parameters.length === 0) return undefined
  return { target, args: checker.getTypeArguments(type as ts.TypeReference).slice(0, parameters.length) }
}

class Printer {
  /** Types declared on their own: interfaces, and anonymous types that contain themselves. */
  readonly names = new Map<ts.Type, string>()
  readonly interfaces = new Set<ts.Type>()
  private readonly stack = new Set<ts.Type>()

  name(type: ts.Type): string {
    const known = this.names.get(type)
    if (known !== undefined) return known
    const symbol = type.aliasSymbol ?? type.getSymbol()
    const base = symbol && IDENTIFIER.test(symbol.name) && !symbol.name.startsWith("__") ? symbol.name : "Recursive"
    let name = base
    const taken = new Set(this.names.values())
    for (let i = 2; taken.has(name) || RESERVED.has(name); i++) name = `${base}${i}`
    this.names.set(type, name)
    return name
  }

  print(type: ts.Type, top = false): string {
    const named = this.names.get(type)
    if (named !== undefined && !top) return named
    if (!top && isOwnInterface(type)) {
      // A generic one (`Page<T>`) is declared once, with its parameters, and referred to with its arguments.
      const generic = genericTarget(type)
      if (generic) {
        this.interfaces.add(generic.target)
        return `${this.name(generic.target)}<${generic.args.map((a) => this.print(a)).join(", ")}>`
      }
      this.interfaces.add(type)
      return this.name(type)
    }
    if (this.stack.has(type)) throw new Recursion(type)
    this.stack.add(type)
    try {
      return this.render(type)
    } finally {
      this.stack.delete(type)
    }
  }

  private render(type: ts.Type): string {
    const f = type.flags
    if (f & ts.TypeFlags.Any) return "any"
    if (f & ts.TypeFlags.TypeParameter) return type.getSymbol()!.name
    if (f & ts.TypeFlags.Unknown) return "unknown"
    if (f & ts.TypeFlags.Never) return "never"
    if (f & (ts.TypeFlags.String | ts.TypeFlags.Number | ts.TypeFlags.Boolean | ts.TypeFlags.BigInt)) {
      return checker.typeToString(type)
    }
    if (f & (ts.TypeFlags.Null | ts.TypeFlags.Undefined | ts.TypeFlags.Void | ts.TypeFlags.NonPrimitive)) {
      return checker.typeToString(type)
    }
    if (f & ts.TypeFlags.StringLiteral) return JSON.stringify((type as ts.StringLiteralType).value)
    if (f & (ts.TypeFlags.NumberLiteral | ts.TypeFlags.BooleanLiteral | ts.TypeFlags.BigIntLiteral)) {
      return checker.typeToString(type)
    }
    if (f & ts.TypeFlags.TemplateLiteral) {
      const t = type as ts.TemplateLiteralType
      const spans = t.types.map((s, i) => `\${${this.print(s)}}${escapeTemplate(t.texts[i + 1]!)}`)
      return `\`${escapeTemplate(t.texts[0]!)}${spans.join("")}\``
    }
    if (type.isUnion()) return this.union(type.types)
    if (type.isIntersection()) return type.types.map((t) => wrap(this.print(t))).join(" & ")
    if (f & ts.TypeFlags.Object) return this.object(type as ts.ObjectType)
    return fail(`cannot print the type ${checker.typeToString(type)} (flags ${f})`)
  }

  union(types: ReadonlyArray<ts.Type>): string {
    const parts = types.map((t) => this.print(t))
    // `boolean` is the union `false | true`: keep it one word.
    const hasBoth = parts.includes("false") && parts.includes("true")
    const rest = hasBoth ? parts.filter((p) => p !== "false" && p !== "true") : parts
    return [...(hasBoth ? ["boolean"] : []), ...rest].map(wrap).join(" | ")
  }

  private object(type: ts.ObjectType): string {
    const lib = libName(type)
    if (lib !== undefined) {
      const args = checker.getTypeArguments(type as ts.TypeReference)
      return args.length > 0 ? `${lib}<${args.map((a) => this.print(a)).join(", ")}>` : lib
    }
    if (checker.isArrayType(type)) {
      const [element] = checker.getTypeArguments(type as ts.TypeReference)
      const readonly = (type as ts.TypeReference).target.getSymbol()?.name === "ReadonlyArray"
      return `${readonly ? "ReadonlyArray" : "Array"}<${this.print(element!)}>`
    }
    if (checker.isTupleType(type)) {
      const reference = type as ts.TypeReference
      const target = reference.target as ts.TupleType
      const elements = checker.getTypeArguments(reference).map((t, i) => {
        const flags = target.elementFlags[i]!
        if (flags & ts.ElementFlags.Rest) return `...Array<${this.print(t)}>`
        if (flags & ts.ElementFlags.Variadic) return `...${this.print(t)}`
        return flags & ts.ElementFlags.Optional ? `${wrap(this.print(t))}?` : this.print(t)
      })
      return `${target.readonly ? "readonly " : ""}[${elements.join(", ")}]`
    }
    if (type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) {
      return fail(`a function type in the API's data: ${checker.typeToString(type)}`)
    }
    const members: Array<string> = []
    for (const info of checker.getIndexInfosOfType(type)) {
      const key = checker.typeToString(info.keyType)
      members.push(`${info.isReadonly ? "readonly " : ""}[key: ${key}]: ${this.print(info.type)}`)
    }
    for (const property of checker.getPropertiesOfType(type)) {
      if (property.name.startsWith("__@")) {
        return fail(`a symbol-keyed property (a brand?) in ${checker.typeToString(type)}: ${property.name}`)
      }
      const optional = (property.flags & ts.SymbolFlags.Optional) !== 0
      const propertyType = checker.getTypeOfSymbol(property)
      // An optional property's type carries `undefined`; `?` says it (exactOptionalPropertyTypes is off).
      const text =
        optional && propertyType.isUnion()
          ? this.union(propertyType.types.filter((t) => !(t.flags & ts.TypeFlags.Undefined)))
          : this.print(propertyType)
      members.push(
        `${isReadonly(property) ? "readonly " : ""}${propertyKey(property.name)}${optional ? "?" : ""}: ${text}`,
      )
    }
    return members.length === 0 ? "{}" : `{ ${members.join("; ")} }`
  }
}

const escapeTemplate = (s: string) => s.replace(/[`\\]/g, "\\$&").replace(/\$\{/g, "\\${")
/** Parenthesised where a union or function would bind wrongly inside `|`, `&`, `?` or `[]`. */
const wrap = (s: string) => (/^[^{(<[]*[|&]/.test(s) || s.includes("=>") ? `(${s})` : s)

/** Prints `print(...)` to a fixpoint: each time a recursive type turns up, it is named and printing starts over. */
const render = <T>(printer: Printer, print: () => T): T => {
  for (;;) {
    try {
      return print()
    } catch (e) {
      if (!(e instanceof Recursion)) throw e
      printer.name(e.type)
    }
  }
}
const RESERVED = new Set(["AgentgovRouter", "AgentgovRouterRecord", "AgentgovErrorShape", "Root", "Procedure"])

interface Leaf {
  readonly path: ReadonlyArray<string>
  readonly kind: "query" | "mutation"
  readonly input: ts.Type
  readonly output: ts.Type
}

const property = (type: ts.Type, name: string) => {
  const symbol = checker.getPropertyOfType(type, name)
  return symbol ? checker.getTypeOfSymbol(symbol) : undefined
}

const leaves = (record: ts.Type, path: ReadonlyArray<string>): Array<Leaf> =>
  checker.getPropertiesOfType(record).flatMap((symbol) => {
    const type = checker.getTypeOfSymbol(symbol)
    const at = [...path, symbol.name]
    const def = property(type, "_def")
    const types = def && property(def, "$types")
    if (!def || !types) return leaves(type, at)
    const kind = checker.typeToString(property(def, "type")!)
    if (kind !== '"query"' && kind !== '"mutation"') return fail(`${at.join(".")}: a ${kind} procedure`)
    return [
      {
        path: at,
        kind: kind === '"query"' ? "query" : "mutation",
        input: property(types, "input")!,
        output: property(types, "output")!,
      },
    ]
  })

const rootType = exported("Root")
const procedures = leaves(exported("Record"), [])
if (procedures.length === 0) fail("no procedures found in the router's type")

const printer = new Printer()
const { body, declarations } = render(printer, () => {
  // The record as nested objects: `agents.versions.create` → { agents: { versions: { create: … } } }.
  type Tree = { [key: string]: Tree | string }
  const tree: Tree = {}
  for (const leaf of procedures) {
    let node = tree
    for (const part of leaf.path.slice(0, -1)) {
      node[part] ??= {}
      node = node[part] as Tree
    }
    const io = `${printer.print(leaf.input)},\n${printer.print(leaf.output)}`
    node[leaf.path.at(-1)!] = `Procedure<"${leaf.kind}", ${io}>`
  }
  const printTree = (node: Tree, indent: string): string =>
    `{\n${Object.entries(node)
      .map(([k, v]) => `${indent}  ${propertyKey(k)}: ${typeof v === "string" ? v : printTree(v, `${indent}  `)}`)
      .join("\n")}\n${indent}}`
  const rootProperty = (name: string) => printer.print(property(rootType, name)!)
  const rootText = `{ ctx: ${rootProperty("ctx")}; meta: ${rootProperty("meta")}; errorShape: AgentgovErrorShape; transformer: ${rootProperty("transformer")} }`
  const errorShape = rootProperty("errorShape")
  // Named (recursive) types last: printing them may name more, so loop until none is new.
  const printed = new Map<string, string>()
  for (let grew = true; grew; ) {
    grew = false
    for (const [type, name] of printer.names) {
      if (printed.has(name)) continue
      const text = printer.print(type, true)
      const parameters = (type as ts.GenericType).typeParameters?.map((p) => p.getSymbol()!.name) ?? []
      const head = parameters.length > 0 ? `${name}<${parameters.join(", ")}>` : name
      printed.set(
        name,
        printer.interfaces.has(type) ? `export interface ${head} ${text}` : `export type ${head} = ${text}`,
      )
      grew = true
    }
  }
  return {
    body: { record: printTree(tree, ""), root: rootText, errorShape },
    declarations: [...printed.values()],
  }
})

const output = `// Generated from @agentgov/api's tRPC router type by @agentgov/trpc-types's build. Do not edit.
import type { TRPCBuiltRouter, TRPCMutationProcedure, TRPCQueryProcedure } from "@trpc/server"

/** The error every procedure fails with: \`data.apiError\` is the REST envelope's error. */
export type AgentgovErrorShape = ${body.errorShape}

type Root = ${body.root}

type Procedure<Kind extends "query" | "mutation", Input, Output> = Kind extends "query"
  ? TRPCQueryProcedure<{ input: Input; output: Output; meta: Root["meta"]; errorShape: AgentgovErrorShape }>
  : TRPCMutationProcedure<{ input: Input; output: Output; meta: Root["meta"]; errorShape: AgentgovErrorShape }>

${declarations.join("\n\n")}

/** Every procedure at its path: GET operations are queries, the rest mutations. */
export type AgentgovRouterRecord = ${body.record}

/**
 * The agentgov tRPC router's type, for \`createTRPCClient<AgentgovRouter>\`: every operation with its input
 * (what is sent) and output (what is answered).
 */
export type AgentgovRouter = TRPCBuiltRouter<Root, AgentgovRouterRecord>
`

mkdirSync(`${root}dist`, { recursive: true })
// Through the compiler's printer, which lays object types out one member a line: readable in an editor.
const formatted = ts.createPrinter().printFile(ts.createSourceFile(distFile, output, ts.ScriptTarget.Latest, false))
writeFileSync(distFile, formatted)

// The written router must be the source's: mutually assignable, per procedure (to name the one that is
// not) and as a whole.
const same = (a: string, b: string) => `[${a}] extends [${b}] ? ([${b}] extends [${a}] ? true : false) : false`
const check = [
  `import type { AgentgovRouter as Source } from "@agentgov/api"`,
  `import type { inferRouterError, inferRouterInputs, inferRouterOutputs } from "@trpc/server"`,
  `import type { AgentgovRouter as Published } from "@agentgov/trpc-types"`,
  `type I = [inferRouterInputs<Source>, inferRouterInputs<Published>]`,
  `type O = [inferRouterOutputs<Source>, inferRouterOutputs<Published>]`,
  ...procedures.flatMap((leaf, i) => {
    const at = leaf.path.map((p) => `[${JSON.stringify(p)}]`).join("")
    const kind = `Source${at}["_def"]["type"], Published${at}["_def"]["type"]`
    return [
      `// ${leaf.path.join(".")}`,
      `export const input${i}: ${same(`I[0]${at}`, `I[1]${at}`)} = true`,
      `export const output${i}: ${same(`O[0]${at}`, `O[1]${at}`)} = true`,
      `export const kind${i}: ${same(kind.split(", ")[0]!, kind.split(", ")[1]!)} = true`,
    ]
  }),
  `export const error: ${same("inferRouterError<Source>", "inferRouterError<Published>")} = true`,
  `export const router: ${same("Source", "Published")} = true`,
].join("\n")
const checked = ts.createProgram(
  [checkFile],
  { ...options, allowImportingTsExtensions: true },
  host(new Map([[checkFile, check]])),
  program,
)
const problems = ts.getPreEmitDiagnostics(checked)
if (problems.length > 0) {
  const lines = check.split("\n")
  const named = problems.map((d) => {
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1
    const procedure = lines.slice(0, line + 1).findLast((l) => l.startsWith("// "))
    return `${procedure ?? ""}\n${diagnosticsText([d])}`
  })
  fail(`the written router differs from the source's:\n${named.join("\n")}`)
}
console.log(
  `@agentgov/trpc-types: ${procedures.length} procedures written to dist/index.d.ts and checked against the source`,
)
