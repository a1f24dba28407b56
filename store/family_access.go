package store

// Access follows the family (README's "Families"): whoever may see a
// family's parent sees its children, and no more. An approver sees a run
// that asked for an approval; in a family, every run of it is seen when
// any of its runs asked, so the parent's page and each child's agree.
// For a run of no family, the family is the run itself.

// familyAskedApprovalSQL is the SQL of whether the family of the run
// aliased alias (its correlation_id) ever asked for an approval.
func familyAskedApprovalSQL(alias string) string {
	return `EXISTS (SELECT 1 FROM runs fa JOIN approvals a ON a.run_id = fa.id
        WHERE fa.correlation_id = ` + alias + `.correlation_id)`
}
