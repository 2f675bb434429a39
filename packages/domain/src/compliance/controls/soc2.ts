import { type Catalogue, chainEvidence, chainGap, metric } from "./Control.ts"

export const soc2: Catalogue = {
  framework: "soc2",
  version: "2026-11-25.1",
  title: "SOC 2",
  source: "AICPA 2017 Trust Services Criteria (with revised points of focus, 2022): CC6, CC7, CC8, A1",
  controls: [
    {
      id: "CC6.1",
      title: "Logical access security",
      reference: "CC6.1",
      citation:
        "The entity implements logical access security software, infrastructure, and architectures over protected information assets to protect them from security events to meet the entity's objectives.",
      satisfiedBy:
        "Fully for the agent's actions: each evaluated by the guard before it ran, unauthorised ones blocked.",
      required: true,
      judge: (f) => {
        const evidence = [
          metric("evaluations", "actions evaluated by the guard", f),
          metric("denials", "actions blocked", f),
          { label: "enforcing policies in force at generation", value: f.enforcingPolicies },
        ]
        return f.metrics.evaluations > 0 && f.enforcingPolicies > 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "partial",
              evidence,
              gaps: [
                "no action was evaluated under an enforcing policy in the period: access control is not evidenced in use",
              ],
            }
      },
    },
    {
      id: "CC6.2",
      title: "Registration, authorization and removal of credentials",
      reference: "CC6.2",
      citation:
        "Prior to issuing system credentials and granting system access, the entity registers and authorizes new internal and external users whose access is administered by the entity. For those users whose access is administered by the entity, user system credentials are removed when user access is no longer authorized.",
      satisfiedBy:
        "Fully for credentials of this service: every key issued by an authorised credential and recorded; none left active for a suspended or deregistered agent.",
      required: true,
      judge: (f) => {
        const evidence = [
          metric("keysCreated", "keys issued (each recorded with the credential that issued it)", f),
          metric("keysRevoked", "keys removed", f),
          {
            label: "active keys of suspended or deregistered agents",
            value: f.keys.ofInactiveAgents.length,
            ids: f.keys.ofInactiveAgents,
          },
        ]
        return f.keys.ofInactiveAgents.length === 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "not_met",
              evidence,
              gaps: [
                `${f.keys.ofInactiveAgents.length} key(s) remain active for agents no longer authorised: revoke them`,
              ],
            }
      },
    },
    {
      id: "CC6.3",
      title: "Role-based access and least privilege",
      reference: "CC6.3",
      citation:
        "The entity authorizes, modifies, or removes access to data, software, functions, and other protected information assets based on roles, responsibilities, or the system design and changes, giving consideration to the concepts of least privilege and segregation of duties, to meet the entity's objectives.",
      satisfiedBy: "Fully for keys of this service: every active key in scope holds fewer than all workspace scopes.",
      required: true,
      judge: (f) => {
        const evidence = [
          { label: "active API keys in scope", value: f.keys.active },
          { label: "active keys holding every workspace scope", value: f.keys.allScopes.length, ids: f.keys.allScopes },
        ]
        return f.keys.allScopes.length === 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "partial",
              evidence,
              gaps: [
                `${f.keys.allScopes.length} active key(s) hold every workspace scope: narrow them to what their holder needs`,
              ],
            }
      },
    },
    {
      id: "CC7.2",
      title: "Monitoring for anomalies",
      reference: "CC7.2",
      citation:
        "The entity monitors system components and the operation of those components for anomalies that are indicative of malicious acts, natural disasters, and errors affecting the entity's ability to meet its objectives; anomalies are analyzed to determine whether they represent security events.",
      satisfiedBy:
        "Fully for the agent's operation: every evaluation and violation recorded in a trail that verifies with no gap.",
      required: true,
      judge: (f) => {
        const evidence = [
          ...chainEvidence(f),
          metric("evaluations", "evaluations recorded", f),
          metric("violations", "violations detected", f),
        ]
        if (!f.chain.valid) return { status: "not_met", evidence, gaps: chainGap(f) }
        return f.metrics.evaluations > 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "partial",
              evidence,
              gaps: ["nothing was evaluated in the period: monitoring is not evidenced in use"],
            }
      },
    },
    {
      id: "CC7.3",
      title: "Evaluation of security events",
      reference: "CC7.3",
      citation:
        "The entity evaluates security events to determine whether they could or have resulted in a failure of the entity to meet its objectives (security incidents) and, if so, takes actions to prevent or address such failures.",
      satisfiedBy: "Fully when violations were acted on: enforcements issued where violations occurred.",
      required: true,
      judge: (f) => {
        const evidence = [
          metric("violations", "violations detected", f),
          metric("enforcements", "enforcements issued", f),
        ]
        return f.metrics.violations === 0 || f.metrics.enforcements > 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "partial",
              evidence,
              gaps: [`${f.metrics.violations} violation(s) and no enforcement: evidence how they were evaluated`],
            }
      },
    },
    {
      id: "CC7.4",
      title: "Response to security incidents",
      reference: "CC7.4",
      citation:
        "The entity responds to identified security incidents by executing a defined incident response program to understand, contain, remediate, and communicate security incidents, as appropriate.",
      satisfiedBy:
        "Fully for enforcements: each contained (suspension, revocation) and closed or resolved; none left open more than 7 days.",
      required: true,
      judge: (f) => {
        const evidence = [
          metric("enforcements", "enforcements issued", f),
          metric("enforcementsResolved", "enforcements resolved or expired", f),
          { label: "median hours to close", value: f.enforcements.medianHoursToClose ?? "none closed" },
          { label: "open more than 7 days", value: f.enforcements.openOver7d.length, ids: f.enforcements.openOver7d },
        ]
        return f.enforcements.openOver7d.length === 0
          ? { status: "met", evidence, gaps: [] }
          : {
              status: "partial",
              evidence,
              gaps: [`${f.enforcements.openOver7d.length} enforcement(s) open for more than 7 days: resolve them`],
            }
      },
    },
    {
      id: "CC8.1",
      title: "Change management",
      reference: "CC8.1",
      citation:
        "The entity authorizes, designs, develops or acquires, configures, documents, tests, approves, and implements changes to infrastructure, data, software, and procedures to meet its objectives.",
      satisfiedBy:
        "Partly: every policy and agent version is recorded with who made it; design, testing and approval before the change are outside these records.",
      required: false,
      judge: (f) => {
        const evidence = [
          metric("policyChanges", "policy versions saved or deleted", f),
          metric("agentVersions", "agent versions recorded", f),
        ]
        return f.metrics.policyChanges + f.metrics.agentVersions > 0
          ? {
              status: "partial",
              evidence,
              gaps: [
                "the testing and approval of each change before it was implemented must be evidenced by the operator",
              ],
            }
          : { status: "not_applicable", evidence, gaps: ["no change was recorded in the period"] }
      },
    },
    {
      id: "A1.2",
      title: "Environmental protections, backup and recovery",
      reference: "A1.2",
      citation:
        "The entity authorizes, designs, develops or acquires, implements, operates, approves, maintains, and monitors environmental protections, software, data backup processes, and recovery infrastructure to meet its objectives.",
      satisfiedBy: "Not by these records: backups and recovery of the deployment are the operator's.",
      required: false,
      judge: (f) => ({
        status: "not_applicable",
        evidence: [...chainEvidence(f).slice(1)],
        gaps: [
          ...chainGap(f),
          "backup schedules, restore tests and recovery infrastructure of the deployment must be evidenced by the operator",
        ],
      }),
    },
  ],
}
