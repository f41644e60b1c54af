-- The Prefect server keeps its own state in a second database of the same cluster.
CREATE DATABASE prefect OWNER hindsight;
