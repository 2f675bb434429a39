import { type Catalogue, chainEvidence, chainGap, type Facts, type Judgement, metric } from "./Control.ts"

/** Art. 12: logs over the period, and the chain that makes them tamper-evident. */
const recordKeeping = (f: Facts): Judgement => {
  const evidence = [...chainEvidence(f), metric("events", "events recorded automatically in the period", f)]
  if (!f.chain.valid) return { status: "not_met", evidence, gaps: chainGap(f) }
  if (f.metrics.events === 0)
    return {
      status: "not_met",
      evidence,
      gaps: ["no event was recorded in the period: the agent's operation left no logs here"],
    }
  return { status: "met", evidence, gaps: [] }
}

/** Art. 14: approvals decided by people, none bypassed. */
const humanOversight = (f: Facts): Judgement => {
  const evidence = [
    metric("approvalsRequired", "evaluations that required a person's approval", f),
    metric("approvalsDecidedByPeople", "approvals decided by a person", f),
    metric("approvalsExpired", "approvals nobody decided in time (denied by default)", f),
    metric("approvalsBypassed", "evaluations that required approval yet proceeded without one", f),
    metric("suspensions", "suspensions (interruptions of the agent) issued", f),
  ]
  if (f.metrics.approvalsBypassed > 0)
    return {
      status: "not_met",
      evidence,
      gaps: [`${f.metrics.approvalsBypassed} action(s) that required approval proceeded without one`],
    }
  if (f.metrics.approvalsRequired === 0 || f.metrics.approvalsDecidedByPeople === 0)
    return {
      status: "partial",
      evidence,
      gaps: [
        "no approval was decided by a person in the period: oversight is configured but its exercise is not evidenced; add require_approval rules for consequential actions",
      ],
    }
  return { status: "met", evidence, gaps: [] }
}

export const euAiAct: Catalogue = {
  framework: "eu-ai-act",
  version: "2026-11-25.1",
  title: "EU AI Act",
  source: "Regulation (EU) 2024/1689 (Artificial Intelligence Act), Chapter III Section 2, Art. 50, Arts. 72–73",
  controls: [
    {
      id: "AIA-9",
      title: "Risk management system",
      reference: "Art. 9(1), 9(2), 9(5)(a)–(b)",
      citation:
        "A risk management system shall be established, implemented, documented and maintained in relation to high-risk AI systems (9(1)); a continuous iterative process run throughout the entire lifecycle (9(2)); risk management measures such that residual risk is judged acceptable, by elimination or reduction of risks and adequate mitigation and control measures (9(5)).",
      satisfiedBy:
        "Partly: enforcing policies in force and the guard's decisions over the period are mitigation and control measures. The risk identification, analysis and testing are the provider's.",
      required: false,
      judge: (f) => {
        const evidence = [
          { label: "enforcing policies in force at generation", value: f.enforcingPolicies },
          metric("evaluations", "actions evaluated against policy", f),
          metric("denials", "actions blocked by policy", f),
        ]
        const gaps = [
          "the documented risk management system itself (identification and analysis of known and foreseeable risks, evaluation, testing — Art. 9(2), 9(6)–9(8)) must be supplied by the provider",
        ]
        return f.enforcingPolicies > 0 && f.metrics.evaluations > 0
          ? { status: "partial", evidence, gaps }
          : {
              status: "not_met",
              evidence,
              gaps: ["no enforcing policy evaluated the agent's actions in the period", ...gaps],
            }
      },
    },
    {
      id: "AIA-10",
      title: "Data and data governance",
      reference: "Art. 10(1)–(3)",
      citation:
        "High-risk AI systems which make use of techniques involving the training of AI models with data shall be developed on the basis of training, validation and testing data sets that meet the quality criteria referred to in paragraphs 2 to 5.",
      satisfiedBy: "Nothing in this service: it governs an agent's actions, not its training data.",
      required: false,
      judge: () => ({
        status: "not_applicable",
        evidence: [],
        gaps: ["data governance of training, validation and testing data sets must be evidenced by the provider"],
      }),
    },
    {
      id: "AIA-11",
      title: "Technical documentation",
      reference: "Art. 11(1), Annex IV",
      citation:
        "The technical documentation of a high-risk AI system shall be drawn up before that system is placed on the market or put into service and shall be kept up-to date; it shall contain, at a minimum, the elements set out in Annex IV.",
      satisfiedBy: "Not by these records: the agent versions recorded here are an input, not the documentation.",
      required: false,
      judge: (f) => ({
        status: "not_applicable",
        evidence: [metric("agentVersions", "agent versions recorded (an input to Annex IV point 1(c))", f)],
        gaps: ["the technical documentation of Annex IV must be drawn up and kept by the provider"],
      }),
    },
    {
      id: "AIA-12",
      title: "Record-keeping",
      reference: "Art. 12(1)–(2)",
      citation:
        "High-risk AI systems shall technically allow for the automatic recording of events (logs) over the lifetime of the system (12(1)); logging capabilities shall enable the recording of events relevant for identifying situations that may result in risk, facilitating post-market monitoring, and monitoring the operation (12(2)).",
      satisfiedBy:
        "Fully: the events recorded over the period, in a hash chain that verifies end to end with no gap, pinned to a signed checkpoint.",
      required: true,
      judge: recordKeeping,
    },
    {
      id: "AIA-13",
      title: "Transparency and provision of information to deployers",
      reference: "Art. 13(1)–(3)",
      citation:
        "High-risk AI systems shall be designed and developed in such a way as to ensure that their operation is sufficiently transparent to enable deployers to interpret a system's output and use it appropriately; they shall be accompanied by instructions for use.",
      satisfiedBy: "Not by these records.",
      required: false,
      judge: () => ({
        status: "not_applicable",
        evidence: [],
        gaps: ["the instructions for use (Art. 13(2)–(3)) must be supplied by the provider"],
      }),
    },
    {
      id: "AIA-14",
      title: "Human oversight",
      reference: "Art. 14(1), 14(4)(d)–(e)",
      citation:
        "High-risk AI systems shall be designed and developed in such a way, including with appropriate human-machine interface tools, that they can be effectively overseen by natural persons during the period in which they are in use (14(1)); those overseeing can decide not to use it or override or reverse its output (14(4)(d)) and intervene or interrupt it through a 'stop' button or a similar procedure (14(4)(e)).",
      satisfiedBy:
        "Fully: actions that required approval were decided by people and none proceeded without one; suspensions show the stop procedure.",
      required: true,
      judge: humanOversight,
    },
    {
      id: "AIA-15",
      title: "Accuracy, robustness and cybersecurity",
      reference: "Art. 15(1), 15(5)",
      citation:
        "High-risk AI systems shall be designed and developed in such a way that they achieve an appropriate level of accuracy, robustness, and cybersecurity, and perform consistently in those respects throughout their lifecycle (15(1)); they shall be resilient against attempts by unauthorised third parties to alter their use, outputs or performance by exploiting system vulnerabilities (15(5)).",
      satisfiedBy:
        "Partly: scoped, expiring credentials and a tamper-evident trail bear on cybersecurity; accuracy and robustness are the provider's.",
      required: false,
      judge: (f) => {
        const evidence = [
          ...chainEvidence(f),
          { label: "active API keys in scope", value: f.keys.active },
          { label: "active keys without an expiry", value: f.keys.withoutExpiry.length, ids: f.keys.withoutExpiry },
          metric("denials", "actions blocked by policy", f),
        ]
        const gaps = [
          "accuracy levels and metrics (Art. 15(3)) and robustness testing must be declared by the provider",
        ]
        return f.chain.valid
          ? { status: "partial", evidence, gaps }
          : { status: "not_met", evidence, gaps: [...chainGap(f), ...gaps] }
      },
    },
    {
      id: "AIA-50",
      title: "Marking of generated content",
      reference: "Art. 50(2)",
      citation:
        "Providers of AI systems generating synthetic audio, image, video or text content shall ensure that the outputs of the AI system are marked in a machine-readable format and detectable as artificially generated or manipulated.",
      satisfiedBy: "Fully, when the agent's generated content is registered here with C2PA provenance or a watermark.",
      required: false,
      judge: (f) => {
        const evidence = [
          metric("contentRegistered", "generated content registered", f),
          metric("contentUnmarked", "registered with neither C2PA nor a watermark", f),
        ]
        if (f.metrics.contentRegistered === 0)
          return {
            status: "not_applicable",
            evidence,
            gaps: [
              "no generated content was registered in the period: if the agent generates content, register it with C2PA or a watermark, or evidence the marking otherwise",
            ],
          }
        if (f.metrics.contentUnmarked > 0)
          return {
            status: f.metrics.contentUnmarked === f.metrics.contentRegistered ? "not_met" : "partial",
            evidence,
            gaps: [`${f.metrics.contentUnmarked} registered item(s) carry no machine-readable marking`],
          }
        return { status: "met", evidence, gaps: [] }
      },
    },
    {
      id: "AIA-72",
      title: "Post-market monitoring",
      reference: "Art. 72(1)–(2)",
      citation:
        "Providers shall establish and document a post-market monitoring system proportionate to the nature of the AI technologies and the risks (72(1)); it shall actively and systematically collect, document and analyse relevant data on the performance of high-risk AI systems throughout their lifetime (72(2)).",
      satisfiedBy:
        "Partly: the trail collects and documents the agent's operation (evaluations, violations, enforcements); the plan (72(3)) and its analysis are the provider's.",
      required: false,
      judge: (f) => {
        const evidence = [
          metric("evaluations", "evaluations recorded", f),
          metric("violations", "policy violations recorded", f),
          metric("enforcements", "enforcements issued", f),
        ]
        const gaps = ["the post-market monitoring plan (Art. 72(3)) and its analysis must be supplied by the provider"]
        return f.metrics.evaluations > 0
          ? { status: "partial", evidence, gaps }
          : { status: "not_met", evidence, gaps: ["no evaluation was recorded in the period", ...gaps] }
      },
    },
    {
      id: "AIA-73",
      title: "Reporting of serious incidents",
      reference: "Art. 73(1)–(2)",
      citation:
        "Providers of high-risk AI systems placed on the Union market shall report any serious incident to the market surveillance authorities of the Member States where that incident occurred (73(1)), immediately after establishing a causal link and not later than 15 days after becoming aware of it (73(2)).",
      satisfiedBy:
        "Partly: incidents handled here (suspensions, revocations) and how fast they were closed; the report to the authority is the provider's.",
      required: false,
      judge: (f) => ({
        status: "partial",
        evidence: [
          { label: "incidents (suspensions and revocations) issued in the period", value: f.enforcements.incidents },
          { label: "closed within 72 hours", value: f.enforcements.incidentsClosedWithin72h },
          { label: "median hours to close", value: f.enforcements.medianHoursToClose ?? "none closed" },
        ],
        gaps: [
          "whether an incident was serious (Art. 3(49)) and its report to the market surveillance authority must be evidenced by the provider",
        ],
      }),
    },
  ],
}
