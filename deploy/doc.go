// Package deploy holds no code: it is the home of the deployment examples (a Kubernetes Indexed Job,
// an AWS Batch array job, a Databricks Jobs for-each task, the embedded sink under Docker Compose) and
// of the test that parses them, with the Dockerfile at the repository's root, and checks that every
// loader flag and environment variable they use exists in `loader <command> --help`.
package deploy
