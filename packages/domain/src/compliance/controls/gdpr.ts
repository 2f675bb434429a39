import { type Catalogue, chainEvidence, chainGap, metric } from "./Control.ts"

export const gdpr: Catalogue = {
  framework: "gdpr",
  version: "2026-11-25.2",
  title: "GDPR",
  source: "Regulation (EU) 2016/679 (General Data Protection Regulation)",
  controls: [
    {
      id: "GDPR-5.1.f",
      title: "Integrity and confidentiality",
      reference: "Art. 5(1)(f)",
      citation:
        "Personal data shall be processed in a manner that ensures appropriate security of the personal data, including protection against unauthorised or unlawful processing and against accidental loss, destruction or damage, using appropriate technical or organisational measures ('integrity and confidentiality').",
      satisfiedBy:
        "Fully for the agent's actions governed here: every action evaluated against policy before it ran, and a trail that verifies with no gap.",
      required: true,
      judge: (f) => {
        const evidence = [
          ...chainEvidence(f),
          metric("evaluations", "actions evaluated against policy before they ran", f),
          metric("denials", "unauthorised actions blocked", f),
        ]
        if (!f.chain.valid) return { status: "not_met", evidence, gaps: chainGap(f) }
        if (f.metrics.evaluations === 0)
          return {
            status: "partial",
            evidence,
            gaps: ["no action was evaluated in the period: the measure is in place but not evidenced in use"],
          }
        return { status: "met", evidence, gaps: [] }
      },
    },
    {
      id: "GDPR-25",
      title: "Data protection by design and by default",
      reference: "Art. 25(1)–(2)",
      citation:
        "The controller shall implement appropriate technical and organisational measures designed to implement data-protection principles in an effective manner (25(1)), and for ensuring that, by default, only personal data which are necessary for each specific purpose of the processing are processed (25(2)).",
      satisfiedBy:
        "Fully for actions governed here: the workspace denies by default (an action no policy allows is refused) and enforcing policies are in force.",
      required: true,
      judge: (f) => {
        const evidence = [
          { label: "the guard's default for actions no policy matches", value: f.guardDefault },
          { label: "enforcing policies in force at generation", value: f.enforcingPolicies },
        ]
        if (f.enforcingPolicies === 0)
          return {
            status: "not_met",
            evidence,
            gaps: ["no enforcing policy is in force: nothing limits what the agent does"],
          }
        if (f.guardDefault !== "deny")
          return {
            status: "partial",
            evidence,
            gaps: ["actions no policy matches are allowed: set the workspace's guardDefault to deny (by default)"],
          }
        return { status: "met", evidence, gaps: [] }
      },
    },
    {
      id: "GDPR-30",
      title: "Records of processing activities",
      reference: "Art. 30(1)",
      citation:
        "Each controller shall maintain a record of processing activities under its responsibility, containing the purposes of the processing, the categories of data subjects and of personal data, the recipients, transfers, envisaged time limits for erasure, and a description of the security measures.",
      satisfiedBy:
        "Partly: the trail records what the agent did; the record of processing (purposes, categories, recipients, time limits) is the controller's.",
      required: false,
      judge: (f) => ({
        status: f.metrics.events > 0 && f.chain.valid ? "partial" : "not_met",
        evidence: [metric("events", "events recorded in the period", f), ...chainEvidence(f)],
        gaps: [
          ...chainGap(f),
          "the record of processing activities with the content of Art. 30(1)(a)–(g) must be kept by the controller",
        ],
      }),
    },
    {
      id: "GDPR-32",
      title: "Security of processing",
      reference: "Art. 32(1)(b), 32(1)(d), 32(4)",
      citation:
        "The controller and the processor shall implement appropriate technical and organisational measures to ensure a level of security appropriate to the risk, including the ability to ensure the ongoing confidentiality, integrity, availability and resilience of processing systems and services (32(1)(b)) and a process for regularly testing, assessing and evaluating their effectiveness (32(1)(d)); and take steps to ensure that any natural person acting under their authority does not process personal data except on instructions (32(4)).",
      satisfiedBy:
        "Fully for access to this service: scoped keys that expire, revoked when no longer needed, and the chain verified at generation.",
      required: true,
      judge: (f) => {
        const evidence = [
          ...chainEvidence(f),
          { label: "active API keys in scope", value: f.keys.active },
          { label: "active keys without an expiry", value: f.keys.withoutExpiry.length, ids: f.keys.withoutExpiry },
          metric("keysRotated", "keys rotated in the period", f),
          metric("keysRevoked", "keys revoked in the period", f),
        ]
        if (!f.chain.valid) return { status: "not_met", evidence, gaps: chainGap(f) }
        if (f.keys.withoutExpiry.length > 0)
          return {
            status: "partial",
            evidence,
            gaps: [`${f.keys.withoutExpiry.length} active key(s) never expire: give them an expiry or rotate them`],
          }
        return { status: "met", evidence, gaps: [] }
      },
    },
    {
      id: "GDPR-33",
      title: "Notification of a personal data breach",
      reference: "Art. 33(1), 33(5)",
      citation:
        "In the case of a personal data breach, the controller shall without undue delay and, where feasible, not later than 72 hours after having become aware of it, notify it to the supervisory authority (33(1)); the controller shall document any personal data breaches, comprising the facts, its effects and the remedial action taken (33(5)).",
      satisfiedBy:
        "Partly: incidents here are documented with their remedial action and time to close; whether one was a personal data breach, and its notification, are the controller's.",
      required: false,
      // Never met nor not met from these records: the 72 hours run to the authority's notification, which is
      // not recorded here. Incidents left open are named as a gap.
      judge: (f) => ({
        status: "partial",
        evidence: [
          { label: "incidents (suspensions and revocations) issued in the period", value: f.enforcements.incidents },
          { label: "closed within 72 hours", value: f.enforcements.incidentsClosedWithin72h },
          {
            label: "enforcements open more than 7 days",
            value: f.enforcements.openOver7d.length,
            ids: f.enforcements.openOver7d,
          },
        ],
        gaps: [
          ...(f.enforcements.incidents > f.enforcements.incidentsClosedWithin72h
            ? [
                `${f.enforcements.incidents - f.enforcements.incidentsClosedWithin72h} incident(s) were not closed within 72 hours: document their facts, effects and remedial action (Art. 33(5))`,
              ]
            : []),
          "which incidents were personal data breaches, and their notification to the supervisory authority within 72 hours, must be evidenced by the controller",
        ],
      }),
    },
  ],
}
