"""Runs the loader binary with the task's parameters (a Databricks for-each task passes its input,
the shard index, as --shard-index {{input}}). The cluster's image (docker_image) holds /loader."""
import os
import sys

os.execv("/loader", ["/loader"] + sys.argv[1:])
