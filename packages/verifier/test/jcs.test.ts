import { createHash } from "node:crypto"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { chainHash, GENESIS_HASH } from "../src/chain.ts"
import { canonicalize } from "../src/jcs.ts"

/** The IEEE 754 double with the given bit pattern (RFC 8785 appendix B lists its vectors this way). */
const double = (hex: string): number => {
  const view = new DataView(new ArrayBuffer(8))
  view.setBigUint64(0, BigInt(`0x${hex}`))
  return view.getFloat64(0)
}

describe("RFC 8785 canonicalization", () => {
  it("canonicalizes the RFC's main example (section 3.2.2)", () => {
    // The input text of the RFC, parsed as a JSON parser would.
    const input = JSON.parse(`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
      "literals": [null, true, false]
    }`)
    expect(canonicalize(input)).toBe(
      `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA'B\\"\\\\\\\\\\"/"}`,
    )
  })

  it("sorts keys by UTF-16 code units, non-BMP characters included (section 3.2.3)", () => {
    const input = JSON.parse(`{
      "\\u20ac": "Euro Sign",
      "\\r": "Carriage Return",
      "\\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\\ud83d\\ude00": "Emoji: Grinning Face",
      "\\u0080": "Control",
      "\\u00f6": "Latin Small Letter O With Diaeresis"
    }`)
    const out = canonicalize(input)
    expect(out).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis",' +
        '"€":"Euro Sign","😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    )
    // By code points U+FB33 would come before U+1F600; by UTF-16 code units (0xD83D < 0xFB33) it does not.
    expect(out.indexOf("😀")).toBeLessThan(out.indexOf("\ufb33"))
  })

  it("sorts keys independently of insertion order and by code unit, not locale", () => {
    const a = canonicalize({ b: 1, a: 2, B: 3, A: 4, aa: 5, "": 6, "10": 7, "9": 8, é: 9, z: 10 })
    const b = canonicalize({ z: 10, é: 9, "9": 8, "10": 7, "": 6, aa: 5, A: 4, B: 3, a: 2, b: 1 })
    expect(a).toBe(b)
    expect(a).toBe('{"":6,"10":7,"9":8,"A":4,"B":3,"a":2,"aa":5,"b":1,"z":10,"é":9}')
  })

  it("sorts nested objects and keeps array order", () => {
    expect(canonicalize({ z: [{ b: 2, a: 1 }, [3, 1, 2]], a: { d: { f: null, e: true }, c: "x" } })).toBe(
      '{"a":{"c":"x","d":{"e":true,"f":null}},"z":[{"a":1,"b":2},[3,1,2]]}',
    )
    expect(canonicalize([])).toBe("[]")
    expect(canonicalize({})).toBe("{}")
    expect(canonicalize([{}, [], [[]]])).toBe("[{},[],[[]]]")
  })

  it("emits no whitespace", () => {
    const out = canonicalize(JSON.parse('{ "a" : [ 1 , 2 ] ,\n "b" : { "c" : "d e" } }'))
    expect(out).toBe('{"a":[1,2],"b":{"c":"d e"}}')
  })

  it("serialises numbers as ECMAScript does (appendix B vectors)", () => {
    const vectors: ReadonlyArray<[string, string]> = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"],
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["ffefffffffffffff", "-1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["c340000000000000", "-9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af5", "9.999999999999997e+22"],
      ["44b52d02c7e14af6", "1e+23"],
      ["44b52d02c7e14af7", "1.0000000000000001e+23"],
      ["444b1ae4d6e2ef4e", "999999999999999700000"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555553", "333333333.3333332"],
      ["41b3de4355555554", "333333333.33333325"],
      ["41b3de4355555555", "333333333.3333333"],
      ["41b3de4355555556", "333333333.3333334"],
      ["41b3de4355555557", "333333333.33333343"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"],
    ]
    for (const [hex, expected] of vectors) {
      expect(canonicalize(double(hex)), hex).toBe(expected)
    }
  })

  it("serialises the usual number edge cases", () => {
    expect(canonicalize(1e21)).toBe("1e+21")
    expect(canonicalize(1e20)).toBe("100000000000000000000")
    expect(canonicalize(1e-7)).toBe("1e-7")
    expect(canonicalize(0.000001)).toBe("0.000001")
    expect(canonicalize(-0)).toBe("0")
    expect(canonicalize([-0, 0])).toBe("[0,0]")
    expect(canonicalize({ n: -0 })).toBe('{"n":0}')
    expect(canonicalize(4.5)).toBe("4.5")
    expect(canonicalize(4.5)).toBe("4.5")
    expect(canonicalize(-1.5e-10)).toBe("-1.5e-10")
    expect(canonicalize(100)).toBe("100")
    expect(canonicalize(0.1 + 0.2)).toBe("0.30000000000000004")
    expect(canonicalize(JSON.parse("1.0"))).toBe("1")
    expect(canonicalize(JSON.parse("-0.0"))).toBe("0")
  })

  it("rejects non-finite numbers", () => {
    expect(() => canonicalize(Number.NaN)).toThrow(TypeError)
    expect(() => canonicalize(double("7fffffffffffffff"))).toThrow(TypeError)
    expect(() => canonicalize(Number.POSITIVE_INFINITY)).toThrow(TypeError)
    expect(() => canonicalize(double("7ff0000000000000"))).toThrow(TypeError)
    expect(() => canonicalize(Number.NEGATIVE_INFINITY)).toThrow(TypeError)
    expect(() => canonicalize({ a: [1, { b: Number.NaN }] })).toThrow(TypeError)
  })

  it("rejects values JSON cannot hold", () => {
    expect(() => canonicalize(10n)).toThrow(TypeError)
    expect(() => canonicalize(Symbol("s"))).toThrow(TypeError)
    expect(() => canonicalize(() => 1)).toThrow(TypeError)
    expect(() => canonicalize([undefined])).toThrow(TypeError)
  })

  it("omits undefined members as JSON.stringify does", () => {
    expect(canonicalize({ a: undefined, b: 1 })).toBe('{"b":1}')
  })

  it("escapes control characters with \\uXXXX lowercase hex, except the short forms", () => {
    const all = Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)).join("")
    const out = canonicalize(all)
    const expected = Array.from({ length: 0x20 }, (_, i) => {
      const short: Record<number, string> = { 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r" }
      return short[i] ?? `\\u${i.toString(16).padStart(4, "0")}`
    }).join("")
    expect(out).toBe(`"${expected}"`)
    expect(out).toContain("\\u001f")
    expect(out).not.toMatch(/\\u00[0-1][A-F]/)
  })

  it("escapes only quote and backslash among printable ASCII; leaves /, DEL, U+2028, U+2029 and non-ASCII as is", () => {
    expect(canonicalize('a"b\\c/d')).toBe('"a\\"b\\\\c/d"')
    expect(canonicalize("\u007f")).toBe('"\u007f"')
    expect(canonicalize("\u2028\u2029")).toBe('"\u2028\u2029"')
    expect(canonicalize("\u2028")).toHaveLength(3)
    expect(canonicalize("€ 😀 ö")).toBe('"€ 😀 ö"')
  })

  it("escapes keys like strings", () => {
    expect(canonicalize({ "a\nb": 1, 'q"': 2 })).toBe('{"a\\nb":1,"q\\"":2}')
  })

  it("serialises literals", () => {
    expect(canonicalize(null)).toBe("null")
    expect(canonicalize(true)).toBe("true")
    expect(canonicalize(false)).toBe("false")
    expect(canonicalize({ a: null })).toBe('{"a":null}')
  })

  it("is stable under a parse / canonicalize round trip", () => {
    const value = { z: [1.5, "x\u0001", { y: null, b: [true] }], a: { "\ud83d\ude00": 1e-7, "\ufb33": -0 } }
    const once = canonicalize(value)
    expect(canonicalize(JSON.parse(once))).toBe(once)
  })
})

/** RFC 8785 written out plainly (every object's keys sorted): what `canonicalize` must equal on either of its paths. */
const reference = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError("non-finite")
    if (!["number", "string", "boolean"].includes(typeof value) && value !== null) throw new TypeError("not JSON")
    return JSON.stringify(Object.is(value, -0) ? 0 : value)
  }
  if (Array.isArray(value)) {
    return `[${Array.from(value, (v) => {
      if (v === undefined) throw new TypeError("undefined element")
      return reference(v)
    }).join(",")}]`
  }
  const members = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${reference((value as Record<string, unknown>)[k])}`)
  return `{${members.join(",")}}`
}

/** The same value with every object's keys inserted in code-unit order: what JSON.stringify writes as it is. */
const ordered = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(ordered)
    : value !== null && typeof value === "object"
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, ordered((value as Record<string, unknown>)[k])]),
        )
      : value

describe("canonicalize's three paths", () => {
  it("write what RFC 8785 writes, for any JSON value, in its own key order and in code-unit order", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalize(value)).toBe(reference(value))
        expect(canonicalize(ordered(value))).toBe(reference(value))
        expect(canonicalize(JSON.parse(JSON.stringify(value)))).toBe(reference(value))
      }),
      { numRuns: 2_000 },
    )
  })

  it("write keys in code-unit order when objects list them otherwise (integer-like keys, non-BMP, nested)", () => {
    // Object.keys lists integer-like keys first, ascending: in code-unit order "10" comes before "9".
    expect(canonicalize({ "9": 1, "10": 2 })).toBe('{"10":2,"9":1}')
    expect(canonicalize({ a: { "\ufb33": 1, "\ud83d\ude00": 2 } })).toBe('{"a":{"\ud83d\ude00":2,"\ufb33":1}}')
    expect(canonicalize([{ a: 1, b: { d: 1, c: 2 } }])).toBe('[{"a":1,"b":{"c":2,"d":1}}]')
  })

  it("write keys an object cannot list in insertion order, out of order or nested in objects out of order", () => {
    // A copy would list "9" before "10" and take "__proto__" for its prototype: the general path writes these.
    expect(canonicalize({ b: 1, a: { "9": 1, "10": 2 } })).toBe('{"a":{"10":2,"9":1},"b":1}')
    expect(canonicalize({ b: 1, a: [{ z: 1, "1x": 2 }] })).toBe('{"a":[{"1x":2,"z":1}],"b":1}')
    const proto = JSON.parse('{"z":1,"__proto__":{"b":2,"a":1}}')
    expect(canonicalize(proto)).toBe('{"__proto__":{"a":1,"b":2},"z":1}')
    expect(canonicalize({ y: [proto], x: 0 })).toBe('{"x":0,"y":[{"__proto__":{"a":1,"b":2},"z":1}]}')
    // Keys that start with a digit but are no index (dates, "1x") keep their insertion order: a copy serves them.
    expect(canonicalize({ "2026-12-02": 1, "2026-12-01": 2, b: { "9x": 1, "10x": 2 } })).toBe(
      '{"2026-12-01":2,"2026-12-02":1,"b":{"10x":2,"9x":1}}',
    )
    expect(canonicalize({ b: 1, "01": 2, "4294967295": 3, "4294967294": 4 })).toBe(
      '{"01":2,"4294967294":4,"4294967295":3,"b":1}',
    )
    // Out of order around them, a copy serves: objects in arrays, arrays in objects, empty ones.
    expect(canonicalize({ b: [{ d: [], c: {} }], a: null })).toBe('{"a":null,"b":[{"c":{},"d":[]}]}')
  })

  it("refuse what JSON cannot hold whether the keys are in order or not", () => {
    expect(() => canonicalize({ b: 1, a: [1, undefined] })).toThrow(TypeError)
    expect(() => canonicalize({ b: 1, a: Number.POSITIVE_INFINITY })).toThrow(TypeError)
    expect(() => canonicalize({ b: 1, a: Symbol("s") })).toThrow(TypeError)
    expect(() => canonicalize({ a: 1, b: [1, undefined] })).toThrow(TypeError)
    // A hole reads as undefined: JSON.stringify would write null.
    // biome-ignore lint/suspicious/noSparseArray: the hole is the case
    expect(() => canonicalize([1, , 2])).toThrow(TypeError)
    expect(() => canonicalize({ a: 1, b: Number.NaN })).toThrow(TypeError)
    expect(() => canonicalize({ a: () => 1 })).toThrow(TypeError)
    expect(() => canonicalize({ a: 1n })).toThrow(TypeError)
  })

  it("never let JSON.stringify call a toJSON or write raw JSON the general path would not", () => {
    const hidden = (o: object) => Object.defineProperty(o, "toJSON", { value: () => "X", enumerable: false })
    expect(canonicalize(hidden({ a: 1 }))).toBe('{"a":1}')
    expect(canonicalize({ a: hidden([1, 2]) })).toBe('{"a":[1,2]}')
    expect(canonicalize(Object.assign([1, 2], { toJSON: () => "X" }))).toBe("[1,2]")
    class Listed extends Array {
      toJSON() {
        return "X"
      }
    }
    expect(canonicalize({ a: Listed.from([1]) })).toBe('{"a":[1]}')
    // A string-valued "toJSON" is data: written as a member, in order.
    expect(canonicalize({ toJSON: "s", a: 1 })).toBe('{"a":1,"toJSON":"s"}')
    // JSON.rawJSON since Node 21 (the package runs on 20 too, where no raw JSON can be made).
    const raw = (JSON as unknown as { rawJSON?: (text: string) => object }).rawJSON
    if (raw !== undefined) {
      expect(canonicalize(raw("1e1000"))).toBe('{"rawJSON":"1e1000"}')
      expect(canonicalize({ a: raw("1.0") })).toBe('{"a":{"rawJSON":"1.0"}}')
    }
    const intrinsic = Object.getOwnPropertyDescriptor(Array.prototype, "toJSON")
    Object.defineProperty(Array.prototype, "toJSON", { value: () => "X", configurable: true })
    try {
      expect(canonicalize({ a: [1], b: { c: 2 } })).toBe('{"a":[1],"b":{"c":2}}')
      expect(canonicalize({ b: [1], a: 2 })).toBe('{"a":2,"b":[1]}')
    } finally {
      delete (Array.prototype as unknown as { toJSON?: unknown }).toJSON
      if (intrinsic) Object.defineProperty(Array.prototype, "toJSON", intrinsic)
    }
  })

  it("leave to the general path whatever the copy cannot take", () => {
    // A Proxy whose length cannot be an array's: the copy fails, the general path refuses as it always has.
    const long = new Proxy([1], { get: (t, k) => (k === "length" ? 1.5 : Reflect.get(t, k)) })
    expect(() => canonicalize({ b: long, a: 1 })).toThrow(TypeError)
  })

  it("treat objects of other prototypes as their own keys, not their toJSON", () => {
    // JSON.stringify would write a Date as its ISO string; canonicalize has always written its (no) own keys.
    expect(canonicalize({ a: new Date(0) })).toBe('{"a":{}}')
    expect(canonicalize({ b: new Date(0), a: 1 })).toBe('{"a":1,"b":{}}')
    expect(canonicalize({ b: new Uint8Array([7]), a: 1 })).toBe('{"a":1,"b":{"0":7}}')
    expect(canonicalize({ a: { toJSON: "x" } })).toBe('{"a":{"toJSON":"x"}}')
    expect(canonicalize(Object.assign(Object.create(null), { a: 1, b: -0 }))).toBe('{"a":1,"b":0}')
    expect(canonicalize({ a: undefined, b: 1 })).toBe('{"b":1}')
  })
})

describe("chain hash (D8)", () => {
  it("is hex SHA-256 of prevHash ‖ type ‖ JCS(data) ‖ timestamp without separators", () => {
    const ts = "2026-11-20T23:59:59.123Z"
    const data = { b: [2, 1], a: "é", n: 1e21 }
    const expected = createHash("sha256")
      .update(Buffer.from(`${GENESIS_HASH}agent.registered{"a":"é","b":[2,1],"n":1e+21}${ts}`, "utf8"))
      .digest("hex")
    expect(chainHash(GENESIS_HASH, "agent.registered", data, ts)).toBe(expected)
    expect(GENESIS_HASH).toBe("0".repeat(64))
  })

  it("matches values computed outside this code base (Python hashlib)", () => {
    expect(chainHash(GENESIS_HASH, "t", {}, "x")).toBe(
      "4161b616ce7498950feabfaab16ff47d5c12407f8de52ef7b254925f5c5fb3d5",
    )
    expect(
      chainHash(GENESIS_HASH, "agent.registered", { n: 1e21, b: [2, 1], a: "é" }, "2026-11-20T23:59:59.123Z"),
    ).toBe("7ee372c3489d5edffdd08928ed15b89a201178746267484eece2619492477711")
  })

  it("depends on every hashed field and on key order only through JCS", () => {
    const ts = "2026-01-01T00:00:00.000Z"
    const base = chainHash(GENESIS_HASH, "t.x", { a: 1, b: 2 }, ts)
    expect(chainHash(GENESIS_HASH, "t.x", { b: 2, a: 1 }, ts)).toBe(base)
    expect(chainHash("1".repeat(64), "t.x", { a: 1, b: 2 }, ts)).not.toBe(base)
    expect(chainHash(GENESIS_HASH, "t.y", { a: 1, b: 2 }, ts)).not.toBe(base)
    expect(chainHash(GENESIS_HASH, "t.x", { a: 1, b: 3 }, ts)).not.toBe(base)
    expect(chainHash(GENESIS_HASH, "t.x", { a: 1, b: 2 }, "2026-01-01T00:00:00.001Z")).not.toBe(base)
  })
})
