// Package databricks talks to a Databricks workspace the way the official SDKs do: it reads
// credentials from the environment or a Databricks CLI profile (~/.databrickscfg), mints OAuth
// machine-to-machine tokens scoped to one table for Zerobus (client credentials against
// {workspace}/oidc/v1/token, section 3 of the Zerobus reference), caches them per table and refreshes
// them before they expire, and counts a table's rows through the SQL Statement Execution API.
//
// Secrets and tokens are never logged nor put into error messages. A TokenSource is safe for
// concurrent use: concurrent callers share one mint. The package never prints.
package databricks
