#!/usr/bin/env python3
"""Write the bundled sample data of ragspan (data/sample/) from hand-written Python data.

The sample is the internal knowledge base of a fictional hosting vendor, Northwind Cloud:
manuals, policies, FAQ, release notes and postmortems, a set of questions, one RAG run
("baseline") and the expected taxonomy label of every claim in its answers.

    python3 scripts/make_sample.py

Deterministic, standard library only. The script asserts the structural invariants
(chunks cover their documents, every retrieved item resolves, every claim is verbatim in
its answer) and then runs a crude lexical re-implementation of the judge's rules over the
expected labels, printing `CHECK:` lines for any label the data does not clearly produce.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import sys
from pathlib import Path


def long_header(
    title: str, owner: str, reviewer: str, reviewed: str, next_review: str, toc: list[str]
) -> list[str]:
    """The boilerplate block that Confluence/GitHub templates put on top of a page."""
    return [
        "CLASSIFICATION: INTERNAL — do not share outside Northwind Cloud",
        f"Title: {title}",
        f"Document owner: {owner}",
        f"Reviewed by: {reviewer}",
        f"Last review: {reviewed} | Next review: {next_review}",
        "Status: APPROVED | Change history: see page history",
        "Table of contents",
        *[f"  {i}. {t}" for i, t in enumerate(toc, 1)],
        "Feedback: #kb-feedback on Slack",
    ]


def short_header(title: str, updated: str | None = None) -> list[str]:
    return [f"# {title}"] + ([f"Last updated: {updated}"] if updated else [])


DOCS: list[dict] = []


def doc(doc_id, doc_type, source, title, header, paras, crlf=False):
    DOCS.append(
        {
            "doc_id": doc_id,
            "doc_type": doc_type,
            "source": source,
            "title": title,
            "header": header,
            "paras": paras,
            "crlf": crlf,
        }
    )


# --------------------------------------------------------------------------- manuals
doc(
    "manuals/compute/instance-types.md",
    "manual",
    "confluence",
    "Compute instance types",
    long_header(
        "Compute instance types",
        "Compute Platform team (Lena Vogel)",
        "Priya Raman",
        "2024-04-02",
        "2024-10-02",
        ["Instance families", "Sizes and prices", "Billing", "Resizing", "Limitations"],
    ),
    [
        (
            "Northwind Compute offers three instance families: Standard, Memory-optimised and "
            "CPU-optimised. Every family is available in fra1, ams2 and nyc3, while the sgp1 and tyo1 "
            "regions offer only the Standard family. The smallest size, s-1, has 1 vCPU and 2 GB of "
            "RAM and costs $6 per month."
        ),
        (
            "Memory-optimised instances provide 8 GB of RAM per vCPU and are meant for caches and "
            "in-memory analytics. The largest size, m-32, has 32 vCPUs and 256 GB of RAM and is billed "
            "at $1,120 per month. CPU-optimised instances run on dedicated AMD EPYC cores that are never "
            "oversubscribed, which makes them the right choice for CI runners and video encoding."
        ),
        (
            "Instances are billed per second with a minimum charge of 60 seconds. A stopped instance "
            "still incurs charges for its disk and reserved IPv4 address, because the capacity stays "
            "allocated to you. To stop billing entirely, destroy the instance after taking a snapshot "
            "of anything you want to keep."
        ),
        (
            "Resizing to a larger size requires a reboot and takes about two minutes. Downsizing is only "
            "possible when the disk was left unchanged during the earlier resize. Northwind Compute does "
            "not support nested virtualisation on any family, and custom kernels must be booted with "
            "the provided GRUB loader."
        ),
    ],
)

doc(
    "manuals/compute/snapshots.md",
    "manual",
    "confluence",
    "Instance snapshots",
    short_header("Instance snapshots", "2024-03-18"),
    [
        (
            "A snapshot is a point-in-time copy of an instance disk. Snapshots are stored in Object "
            "Storage in the same region and cost $0.05 per GB per month, measured on the compressed "
            "size of the disk image rather than on the provisioned disk size."
        ),
        (
            "You can snapshot a running instance, but for a consistent file system we recommend powering "
            "it off first. Each project can keep up to 100 snapshots. Snapshots older than 400 days are "
            "not deleted automatically, so review old snapshots from time to time to keep costs down."
        ),
        (
            "Snapshots can be copied to another region with the nwctl snapshot copy command. "
            "Cross-region copies are billed as outbound transfer at $0.01 per GB. A snapshot cannot be "
            "restored to a disk that is smaller than the one it was taken from."
        ),
        (
            "Restoring a snapshot creates a new instance or overwrites the disk of an existing "
            "instance of the same size or larger. A restore of a 100 GB snapshot usually finishes in "
            "under ten minutes, and the restored instance keeps none of the original reserved IP "
            "addresses."
        ),
    ],
)

doc(
    "manuals/storage/object-storage.md",
    "manual",
    "github",
    "Object Storage user guide",
    long_header(
        "Object Storage user guide",
        "Storage team (Aiko Tanaka)",
        "Tomás Ferreira",
        "2024-05-06",
        "2024-11-06",
        ["Overview and pricing", "Buckets", "Versioning", "Presigned URLs", "Unsupported features"],
    ),
    [
        (
            "Northwind Object Storage is an S3-compatible service for unstructured data such as "
            "backups, media and logs. A single object can be up to 5 TB in size. The base Object "
            "Storage subscription costs $5 per month and includes 250 GB of storage and 1 TB of "
            "outbound transfer."
        ),
        (
            "Storage beyond the included 250 GB is billed at $0.02 per GB per month. Outbound transfer "
            "beyond the included 1 TB costs $0.01 per GB, and inbound transfer is free. Requests are "
            "not billed separately, so a workload with many small reads costs the same as one with a "
            "few large ones."
        ),
        (
            "Bucket names must be 3 to 63 characters long and unique within a region. Each account can "
            "create up to 100 buckets. Versioning is off by default and can be enabled per bucket. Once "
            "enabled, versioning can be suspended but it can never be switched off completely."
        ),
        (
            "Object Storage supports presigned URLs that stay valid for up to 7 days. It does not "
            "support object lock or WORM retention, and SSE-C encryption with customer-provided keys is "
            "not available. Server-side encryption with Northwind-managed keys is always on."
        ),
    ],
)

doc(
    "manuals/storage/lifecycle-rules.md",
    "manual",
    "github",
    "Bucket lifecycle rules",
    short_header("Bucket lifecycle rules"),
    [
        (
            "Lifecycle rules delete objects automatically based on their age. A bucket can have at most "
            "50 lifecycle rules, and each rule matches objects by key prefix or by object tag. Rules are "
            "written as XML or JSON and uploaded with any S3-compatible client."
        ),
        (
            "Expiration actions run once a day at 00:00 UTC, so an object may remain visible for up to "
            "24 hours after it becomes eligible for deletion. Deleted objects cannot be recovered unless "
            "versioning was enabled on the bucket before the deletion."
        ),
        (
            "We recommend a rule that aborts incomplete multipart uploads in every bucket. Incomplete "
            "multipart uploads count towards your storage usage until they are aborted, and they do not "
            "appear in ordinary object listings."
        ),
        (
            "Changes to lifecycle rules apply to existing objects at the next daily run. Lifecycle "
            "rules do not move objects to a cheaper storage class, because Object Storage has a "
            "single storage class."
        ),
    ],
)

doc(
    "manuals/storage/block-volumes.md",
    "manual",
    "confluence",
    "Block Storage volumes",
    long_header(
        "Block Storage volumes",
        "Storage team (Aiko Tanaka)",
        "Lena Vogel",
        "2024-02-20",
        "2024-08-20",
        ["Overview", "Limits and performance", "Resizing", "Detaching and billing"],
    ),
    [
        (
            "Block Storage volumes are network-attached SSD disks that can be attached to one instance "
            "at a time. Volumes range from 1 GB to 16 TB and cost $0.10 per GB per month. A volume must "
            "be in the same region as the instance it is attached to."
        ),
        (
            "Each instance can have up to 7 volumes attached. Volumes deliver a baseline of 3,000 IOPS "
            "and can burst to 7,500 IOPS for up to 30 minutes. Volumes can be grown online without "
            "downtime, but a volume cannot be shrunk once it has been grown."
        ),
        (
            "Detaching a volume does not delete its data, and the volume can be attached to another "
            "instance in the same region right away. A detached volume is still billed until it is "
            "destroyed, which is the most common reason for unexpected storage charges."
        ),
    ],
)

doc(
    "manuals/database/managed-postgres.md",
    "manual",
    "confluence",
    "Managed PostgreSQL",
    long_header(
        "Managed PostgreSQL",
        "Data Services team (Marek Nowak)",
        "José Müller",
        "2024-03-28",
        "2024-09-28",
        ["Plans", "High availability", "Connections", "Extensions", "Maintenance"],
    ),
    [
        (
            "Managed PostgreSQL clusters run PostgreSQL 14, 15 or 16 on dedicated nodes. A single-node "
            "Managed PostgreSQL cluster starts at $15 per month with 1 vCPU, 1 GB of RAM and 10 GB of "
            "storage. High-availability clusters add up to two standby nodes in separate availability "
            "zones."
        ),
        (
            "Automatic failover promotes a standby node within 30 seconds when the primary stops "
            "responding. Connection pooling with PgBouncer is included on every plan. The maximum number "
            "of direct connections is 25 per GB of RAM, so a 4 GB node accepts 100 connections."
        ),
        (
            "Superuser access is not granted to customers. The nwadmin role has every privilege except "
            "SUPERUSER. Extensions can be enabled from an allow-list of 48 extensions, including PostGIS "
            "and pgvector. TimescaleDB is not supported as an extension."
        ),
        (
            "Maintenance windows are one hour long and can be scheduled on any day of the week. Minor "
            "version upgrades are applied automatically during the window, and customers are notified "
            "by email 7 days in advance."
        ),
    ],
)

doc(
    "manuals/database/backups-pitr.md",
    "manual",
    "confluence",
    "Database backups and PITR",
    short_header("Database backups and point-in-time recovery", "2024-01-15"),
    [
        (
            "Every Managed PostgreSQL cluster is backed up daily, and daily backups are retained for 7 "
            "days. Point-in-time recovery lets you restore a cluster to any second within that "
            "retention period, using the write-ahead log that is archived every 5 minutes."
        ),
        (
            "A point-in-time restore always creates a new cluster, and the original cluster is never "
            "overwritten. Restores of databases larger than 500 GB can take several hours, so test your "
            "recovery time before you rely on it."
        ),
        (
            "Backups are stored in a paired region: fra1 backs up to ams2, nyc3 backs up to tor1 and "
            "sgp1 backs up to tyo1. Backups are encrypted with AES-256 and cannot be downloaded "
            "directly. Use pg_dump if you need a copy outside Northwind Cloud."
        ),
        (
            "To restore from the control panel, open the cluster, choose Backups and pick a "
            "timestamp. From the command line, run nwctl db restore with the --to-time flag and a "
            "timestamp in RFC 3339 format, for example 2024-05-01T10:30:00Z."
        ),
    ],
)

doc(
    "manuals/networking/load-balancers.md",
    "manual",
    "github",
    "Load Balancers",
    long_header(
        "Load Balancers",
        "Networking team (Samuel Okafor)",
        "Priya Raman",
        "2024-06-11",
        "2024-12-11",
        ["Overview and pricing", "Health checks", "TLS", "Scaling", "Limitations"],
    ),
    [
        (
            "Northwind Load Balancers distribute HTTP, HTTPS, HTTP/2 and TCP traffic across instances "
            "in one region. A load balancer costs $12 per month per node. Each node handles up to "
            "10,000 concurrent connections."
        ),
        (
            "Health checks run every 10 seconds by default against a path or port you choose. A target "
            "is removed from rotation after 3 consecutive failed checks and is restored after 5 "
            "consecutive successful checks. The health check timeout defaults to 5 seconds."
        ),
        (
            "TLS certificates can be uploaded or issued automatically by Let’s Encrypt. Load balancers "
            "do not support UDP traffic. Sticky sessions are only available with cookie-based "
            "affinity, and the cookie lifetime can be set from 1 minute to 24 hours."
        ),
        (
            "A load balancer can be scaled from 1 to 100 nodes. Scaling changes take effect within five "
            "minutes and existing connections are kept open while nodes are added or removed."
        ),
    ],
)

doc(
    "manuals/networking/vpc.md",
    "manual",
    "github",
    "Virtual Private Cloud",
    short_header("Virtual Private Cloud (VPC)"),
    [
        (
            "Every project gets a default VPC in each region with the address range 10.110.0.0/20. "
            "Custom VPCs can use any RFC 1918 range with a prefix between /16 and /28. Address ranges "
            "of VPCs in the same account must not overlap."
        ),
        (
            "Traffic inside a VPC is free and stays on the Northwind network. VPCs are regional, so "
            "instances in fra1 cannot join a VPC in ams2. Cross-region connectivity requires VPC "
            "peering, which is billed at $0.01 per GB in each direction."
        ),
        (
            "An instance can belong to only one VPC at a time. Moving an instance to another VPC "
            "requires taking a snapshot and rebuilding the instance from it in the target VPC."
        ),
        (
            "Firewall rules are attached to instances, not to VPCs. Each firewall can hold up to 50 "
            "inbound and 50 outbound rules, and a firewall change takes effect within 30 seconds on "
            "every attached instance."
        ),
        (
            "Northwind Cloud does not provide a managed NAT gateway. Instances without a public IPv4 "
            "address reach the internet through a self-managed gateway instance in the same VPC."
        ),
    ],
)

doc(
    "manuals/networking/dns.md",
    "manual",
    "github",
    "DNS hosting",
    short_header("DNS hosting", "2024-05-20"),
    [
        (
            "Northwind DNS hosts authoritative zones for domains you own at no extra cost. Each account "
            "can host up to 500 zones with up to 3,500 records per zone, and changes propagate to all "
            "name servers within 60 seconds."
        ),
        (
            "DNS records support the A, AAAA, CAA, CNAME, MX, NS, SRV and TXT types. The minimum TTL "
            "for DNS records is 30 seconds, and the default TTL is 3600 seconds."
        ),
        (
            "Northwind DNS does not offer DNSSEC signing today. Domain registration is not available "
            "either, so domains must be bought from an external registrar and delegated to "
            "ns1.northwind.cloud, ns2.northwind.cloud and ns3.northwind.cloud."
        ),
        (
            "Zones can be imported from a BIND zone file of up to 1 MB. Every change made in the "
            "control panel or through the API is recorded in the activity log of the team."
        ),
    ],
)

doc(
    "manuals/kubernetes/nks-overview.md",
    "manual",
    "github",
    "Northwind Kubernetes Service (NKS) overview",
    long_header(
        "Northwind Kubernetes Service (NKS) overview",
        "Kubernetes team (Hannah Berg)",
        "Samuel Okafor",
        "2024-06-03",
        "2024-12-03",
        [
            "Pricing",
            "Cluster limits",
            "Autoscaling",
            "Versions and upgrades",
            "Unsupported configurations",
        ],
    ),
    [
        (
            "Northwind Kubernetes Service (NKS) runs a managed control plane for free, and you pay only "
            "for worker nodes at regular Compute prices. A highly available NKS control plane is an "
            "optional add-on that costs $40 per month per cluster."
        ),
        (
            "Each NKS cluster supports up to 512 nodes across all node pools. Node pools can autoscale "
            "between a minimum and a maximum node count, and the cluster autoscaler checks for pending "
            "pods every 10 seconds."
        ),
        (
            "NKS supports the three most recent Kubernetes minor versions. Clusters are upgraded "
            "automatically during the maintenance window once their version reaches end of life, 14 "
            "months after its release. Windows worker nodes are not supported."
        ),
    ],
)

doc(
    "manuals/cli/nwctl.md",
    "manual",
    "github",
    "nwctl command-line reference",
    short_header("nwctl command-line reference"),
    [
        (
            "nwctl is the official command-line client for Northwind Cloud. It is distributed as a "
            "single binary for Linux, macOS and Windows, and it can be installed with Homebrew, Scoop "
            "or the install script at get.northwind.cloud."
        ),
        (
            "Authenticate with nwctl auth login, which stores a personal access token in "
            "~/.config/nwctl/config.yaml. Personal access tokens created by nwctl auth login expire "
            "after 90 days unless you pass the --no-expiry flag."
        ),
        (
            "Output defaults to a human-readable table. Add --output json for machine-readable output, "
            "and set the NWCTL_CONTEXT environment variable to switch between accounts without logging "
            "in again."
        ),
        (
            "Every nwctl command accepts --help. Long-running commands such as nwctl instance create "
            "return immediately unless you add --wait, which blocks until the resource is active or "
            "the timeout of 10 minutes is reached."
        ),
        (
            "nwctl respects the HTTPS_PROXY environment variable. Debug logging is enabled with "
            "--trace, which prints every API request but masks the access token."
        ),
    ],
)

doc(
    "manuals/monitoring/lighthouse-alerts.md",
    "manual",
    "confluence",
    "Lighthouse monitoring and alerts",
    long_header(
        "Lighthouse monitoring and alerts",
        "Observability team (Chloé Martin)",
        "Hannah Berg",
        "2024-01-30",
        "2024-07-30",
        ["Metrics", "Alert policies", "Notification channels", "Logs"],
    ),
    [
        (
            "Lighthouse collects CPU, memory, disk and bandwidth metrics from every instance at "
            "one-minute resolution and keeps the metrics for 30 days. The Lighthouse agent is installed "
            "by default on images published after March 2023."
        ),
        (
            "Alert policies fire when a metric crosses a threshold for 5, 10, 30 or 60 minutes. Each "
            "account can create up to 200 alert policies. Notifications can be sent by email, Slack or "
            "PagerDuty, and every policy can notify up to 10 channels."
        ),
        (
            "Lighthouse does not collect application logs. To ship logs, forward them to an external "
            "provider such as Datadog or to a self-managed OpenSearch cluster."
        ),
    ],
)

doc(
    "manuals/cdn/edge-cache.md",
    "manual",
    "github",
    "Edge CDN",
    short_header("Edge CDN", "2024-04-22"),
    [
        (
            "Edge CDN caches content from Object Storage buckets at 42 points of presence worldwide. "
            "Enabling the CDN on a bucket is free, and CDN egress is billed at the same rate as regular "
            "outbound transfer from the bucket."
        ),
        (
            "The default cache TTL is 3600 seconds and can be set anywhere from 60 seconds to 7 days. "
            "Purging a path removes it from every point of presence within 60 seconds, and each account "
            "can purge up to 1,000 paths per hour."
        ),
        (
            "Custom domains on the CDN need a certificate issued by Let’s Encrypt or uploaded by you. "
            "Edge CDN does not support origins outside Northwind Object Storage."
        ),
        (
            "The CDN adds an X-Cache header with the value HIT or MISS to every response. Query "
            "strings are part of the cache key by default, and this can be disabled per endpoint to "
            "improve the hit rate."
        ),
    ],
)

doc(
    "manuals/regions/tokyo-region.md",
    "manual",
    "confluence",
    "東京 (tyo1) region guide",
    short_header("東京 (tyo1) region guide", "2024-04-15"),
    [
        (
            "The 東京 region, tyo1, opened on 15 April 2024 and is hosted in a Tier III data centre in "
            "Kōtō, Tokyo. It is Northwind Cloud’s second region in Asia after sgp1."
        ),
        (
            "At launch tyo1 offers Compute Standard instances, Block Storage, Object Storage and Load "
            "Balancers. Managed PostgreSQL and NKS are not yet available in tyo1 and are planned for "
            "the first half of 2025."
        ),
        (
            "Prices in tyo1 are 10% higher than in fra1 because of local power costs. Invoices for "
            "customers with a Japanese billing address include 10% consumption tax (消費税)."
        ),
        (
            "Network latency from tyo1 to sgp1 is about 70 milliseconds. The region is connected to "
            "the JPIX and BBIX internet exchanges, and customers in Osaka see latencies below 10 "
            "milliseconds."
        ),
        (
            "The regional account manager for Japan is Yuki Sato, who can help with procurement in "
            "yen. Support in Japanese is available from 9:00 to 18:00 JST on business days."
        ),
    ],
)

# --------------------------------------------------------------------------- policies
doc(
    "policies/refunds.md",
    "policy",
    "confluence",
    "Refund policy",
    long_header(
        "Refund policy",
        "Finance team (Marta Kowalski)",
        "Legal (Jonas Lindqvist)",
        "2024-01-08",
        "2025-01-08",
        ["Prepaid credit", "Service credits", "Promotional credit", "Exclusions"],
    ),
    [
        (
            "Northwind Cloud refunds unused prepaid credit within 60 days of purchase when an account is "
            "closed. Usage that has already been consumed is not refundable, and partial months are "
            "never prorated back to the customer."
        ),
        (
            "Service credits for SLA breaches are applied to the next invoice and are never paid out as "
            "cash. Refunds are returned to the original payment method within 10 business days."
        ),
        (
            "Promotional credit, including the free trial credit, has no cash value and is not "
            "refundable. Accounts terminated for violating the Acceptable Use Policy are not eligible for "
            "any refund."
        ),
    ],
)

doc(
    "policies/sla.md",
    "policy",
    "confluence",
    "Service Level Agreement",
    long_header(
        "Service Level Agreement",
        "Legal (Jonas Lindqvist)",
        "Site Reliability (Aiko Tanaka)",
        "2024-02-01",
        "2025-02-01",
        ["Commitments", "Service credits", "Claiming credits", "Exclusions"],
    ),
    [
        (
            "Northwind Cloud commits to 99.99% monthly uptime for Compute instances and Block Storage, "
            "and to 99.95% monthly uptime for Object Storage and Managed PostgreSQL. Uptime is measured "
            "separately for each region."
        ),
        (
            "If monthly uptime falls below the commitment, customers receive service credits. The "
            "credit is 10% of the monthly charge for uptime below the commitment, 25% for uptime below "
            "99.0%, and 100% for uptime below 95.0%."
        ),
        (
            "Credits must be requested through a support ticket within 30 days of the end of the "
            "affected month. The SLA does not cover scheduled maintenance announced at least 72 hours "
            "in advance, or outages caused by customer configuration."
        ),
    ],
)

doc(
    "policies/acceptable-use.md",
    "policy",
    "confluence",
    "Acceptable Use Policy",
    short_header("Acceptable Use Policy", "2023-12-01"),
    [
        (
            "Customers may not use Northwind Cloud for what this policy calls “abusive workloads”: "
            "sending unsolicited bulk email, running open proxies, or mining cryptocurrency. "
            "Cryptocurrency mining is prohibited on every plan, including dedicated instances."
        ),
        (
            "Outbound SMTP on port 25 is blocked for accounts younger than 60 days. Customers can "
            "request an exception through a support ticket after paying their first invoice."
        ),
        (
            "The Trust & Safety team reviews abuse reports within 24 hours. Repeated violations lead to "
            "suspension, and accounts that are suspended three times are terminated permanently."
        ),
        (
            "Security scanning of your own resources is allowed. Scanning third-party networks from "
            "Northwind Cloud requires written permission from the owner of the target network."
        ),
    ],
)

doc(
    "policies/data-retention.md",
    "policy",
    "confluence",
    "Customer data retention",
    long_header(
        "Customer data retention",
        "Privacy office (Elif Demir)",
        "Legal (Jonas Lindqvist)",
        "2024-03-12",
        "2025-03-12",
        ["Closed accounts", "Billing and audit records", "Deletion guarantees"],
    ),
    [
        (
            "When an account is closed, Northwind Cloud keeps customer data for 30 days so that it can "
            "be restored on request. After those 30 days all instances, volumes, snapshots and buckets "
            "are permanently deleted."
        ),
        (
            "Billing records are kept for 10 years to meet German tax law. Access logs for the control "
            "panel are retained for 400 days and are available to team owners on request."
        ),
        (
            "Deleted data cannot be recovered after the retention period, even by Northwind staff. "
            "Backups of deleted Managed PostgreSQL clusters are purged 7 days after the cluster is "
            "deleted."
        ),
    ],
)

doc(
    "policies/security/password-and-2fa.md",
    "policy",
    "confluence",
    "Passwords and 2FA",
    short_header("Passwords and two-factor authentication", "2024-09-01"),
    [
        (
            "Control panel passwords must be at least 12 characters long. Passwords are checked against "
            "a list of known breached passwords at signup and at every password change."
        ),
        (
            "Two-factor authentication with a TOTP app or a hardware security key is mandatory for all "
            "team owners since 1 September 2024. SMS is not accepted as a second factor."
        ),
        (
            "After 10 failed login attempts the account is locked for 30 minutes. Support staff never "
            "ask customers for their password or for 2FA codes, by email or by phone."
        ),
        (
            "API tokens are not affected by password changes. Revoke tokens separately from the API "
            "page when an employee leaves the team."
        ),
    ],
)

doc(
    "policies/support-tiers.md",
    "policy",
    "zendesk",
    "Support plans",
    long_header(
        "Support plans",
        "Customer Support (Grace Adeyemi)",
        "Finance team (Marta Kowalski)",
        "2024-05-27",
        "2024-11-27",
        ["Basic", "Business", "Premium", "What no plan includes"],
    ),
    [
        (
            "Northwind Cloud offers three support plans: Basic, Business and Premium. Basic support is "
            "free and answers tickets within 24 hours on business days."
        ),
        (
            "Business support costs $100 per month and answers urgent tickets within 4 hours, around "
            "the clock. Premium support costs $500 per month or 10% of monthly spend, whichever is "
            "higher, and answers urgent tickets within 30 minutes."
        ),
        (
            "Premium customers get a named technical account manager. Phone support is only available "
            "on the Premium plan. No support plan includes on-site visits."
        ),
    ],
)

doc(
    "policies/security/vulnerability-disclosure.md",
    "policy",
    "github",
    "Vulnerability disclosure policy",
    short_header("Vulnerability disclosure policy"),
    [
        (
            "Security researchers can report vulnerabilities to security@northwind.cloud or through our "
            "HackerOne programme. We acknowledge every report within 2 business days and send a first "
            "assessment within 10 business days."
        ),
        (
            "Bounty rewards range from $100 for low-severity issues to $10,000 for critical remote code "
            "execution. Denial-of-service testing and social engineering of staff are out of scope."
        ),
        (
            "We ask researchers not to publish details until a fix is released or until 90 days have "
            "passed since the report, whichever comes first."
        ),
        (
            "Researchers who follow this policy will not face legal action from Northwind Cloud. The "
            "Security team, led by Daniel Achterberg, publishes a hall of fame with the names of "
            "researchers who agree to be listed."
        ),
    ],
)

doc(
    "policies/invoicing.md",
    "policy",
    "sharepoint",
    "Invoicing and payment terms",
    short_header("Invoicing and payment terms", "2024-02-05"),
    [
        (
            "Invoices are issued on the first day of each month for the previous month’s usage.\n"
            "Payment is due within 14 days of the invoice date."
        ),
        (
            "Accepted payment methods are credit card, SEPA direct debit and PayPal.\n"
            "Bank transfers are only accepted for accounts with a monthly spend above $2,000."
        ),
        (
            "If a payment fails, it is retried after 3, 7 and 14 days.\n"
            "Accounts with invoices unpaid for 30 days are suspended, and suspended resources are "
            "deleted after a further 30 days."
        ),
        (
            "VAT is charged according to the customer’s billing address.\n"
            "Business customers in the EU can add a VAT ID to use the reverse-charge mechanism."
        ),
        (
            "Invoices are sent as PDF files to the billing email address.\nCorrections to an invoice "
            "can be requested within 60 days of its issue date."
        ),
    ],
    crlf=True,
)

doc(
    "policies/account-deletion.md",
    "policy",
    "zendesk",
    "Closing an account",
    short_header("Closing an account"),
    [
        (
            "Only the team owner can close an account. Before closing, all resources must be destroyed "
            "and any unpaid invoices must be settled, otherwise the Close account button stays disabled."
        ),
        (
            "Closing an account cancels all subscriptions immediately. The email address of a closed "
            "account cannot be reused for a new account for 90 days."
        ),
        (
            "Closing an account does not delete data immediately. Customer data is kept according to "
            "the data retention policy and can be restored on request during that period."
        ),
        (
            "If an account cannot be closed because the team owner has left the company, another team "
            "member can ask support to transfer ownership. Support needs a signed letter on company "
            "letterhead for the transfer."
        ),
    ],
)

# --------------------------------------------------------------------------- FAQ (Zendesk)
doc(
    "faq/billing.md",
    "faq",
    "zendesk",
    "Billing FAQ",
    short_header("Billing FAQ", "2023-06-14"),
    [
        (
            "Q: When am I charged?\nA: We bill in arrears. Your card is charged on the first day of "
            "each month for the previous month’s usage 🙂"
        ),
        # outdated on purpose: the support plan page says $100 (source_conflict in the sample)
        (
            "Q: How much does Business support cost?\nA: Business support costs $80 per month. "
            "Business support includes 4-hour responses to urgent tickets."
        ),
        (
            "Q: Do you offer a free trial?\nA: Yes. New accounts receive $200 of free trial credit "
            "that is valid for 60 days. A valid credit card is required to activate the trial credit."
        ),
        (
            "Q: Can I set a spending limit?\nA: You can set a billing alert at any amount. Northwind "
            "Cloud does not support hard spending caps that stop resources."
        ),
        (
            "Q: Can I get an invoice in another currency?\nA: Invoices are issued in US dollars or in "
            "euros. The invoice currency is chosen when the account is created and cannot be changed "
            "later."
        ),
    ],
)

doc(
    "faq/storage.md",
    "faq",
    "zendesk",
    "Storage FAQ",
    short_header("Storage FAQ"),
    [
        (
            "Q: Is Object Storage compatible with the AWS SDKs?\nA: Yes. Any S3-compatible SDK works "
            "when you set the endpoint to https://<region>.nwstore.cloud and use an access key created "
            "under API › Spaces keys."
        ),
        (
            "Q: Why is my bucket still billed after deleting all files?\nA: Older object versions are "
            "kept when versioning is enabled, and they are billed like any other object. Incomplete "
            "multipart uploads are billed too."
        ),
        (
            "Q: Can I mount a bucket as a file system?\nA: Not officially. Tools like s3fs work, but "
            "Northwind support does not troubleshoot them."
        ),
        (
            "Q: Is there a limit on requests per second?\nA: Each bucket accepts up to 1,500 requests "
            "per second. Clients that exceed the limit receive HTTP 503 SlowDown responses and should "
            "retry with backoff."
        ),
        (
            "Q: Can I host a static website from a bucket?\nA: Yes. Enable static website hosting in "
            "the bucket settings and set an index document. Combine it with Edge CDN to use a custom "
            "domain."
        ),
    ],
)

doc(
    "faq/kubernetes.md",
    "faq",
    "zendesk",
    "Kubernetes FAQ",
    short_header("Kubernetes FAQ", "2023-09-04"),
    [
        # outdated on purpose: the NKS overview says $40 (source_conflict in the sample)
        (
            "Q: Do I pay for the NKS control plane?\nA: The standard NKS control plane is free. The "
            "highly available control plane costs $30 per month per cluster."
        ),
        (
            "Q: Which CNI does NKS use?\nA: NKS uses Cilium as its CNI plugin. Cilium cannot be "
            "replaced with Calico or Flannel."
        ),
        (
            "Q: Can I use GPU nodes?\nA: GPU node pools with NVIDIA L40S cards are available in fra1 "
            "and nyc3 only."
        ),
        (
            "Q: Where do NKS logs go?\nA: Control plane audit logs can be streamed to an Object "
            "Storage bucket. Node logs stay on the nodes until you install a log collector such as "
            "Fluent Bit."
        ),
        (
            "Q: Is there a limit on pods per node?\nA: Each NKS node runs at most 110 pods. The limit "
            "cannot be raised."
        ),
        (
            "Q: Can I bring my own load balancer controller?\nA: Services of type LoadBalancer always "
            "create a Northwind Load Balancer. Other controllers can be installed but are not "
            "supported by Northwind support."
        ),
    ],
)

doc(
    "faq/account.md",
    "faq",
    "zendesk",
    "Account FAQ",
    short_header("Account FAQ"),
    [
        (
            "Q: How do I add a teammate?\nA: Team owners can invite members from Settings › Team. Each "
            "team can have up to 50 members, and every member needs their own login."
        ),
        (
            "Q: Can I transfer resources between teams?\nA: Instances, volumes and snapshots can be "
            "transferred between teams you own. Buckets and databases cannot be transferred."
        ),
        (
            "Q: I lost my 2FA device. What now?\nA: Use one of your 10 recovery codes. If none are "
            "left, support can reset 2FA after verifying your identity with a government-issued ID, "
            "which takes up to 3 business days."
        ),
        (
            "Q: Can I change the email address of my account?\nA: Yes. Change it under Settings › "
            "Profile. A confirmation link is sent to the new address and expires after 24 hours."
        ),
    ],
)

doc(
    "faq/networking.md",
    "faq",
    "zendesk",
    "Networking FAQ",
    short_header("Networking FAQ"),
    [
        (
            "Q: Does Northwind Cloud support IPv6?\nA: Yes. Every instance in fra1, ams2 and nyc3 can "
            "have one IPv6 /64 at no charge. IPv6 is not yet available in sgp1."
        ),
        (
            "Q: How much does a reserved IP cost?\nA: A reserved IPv4 address is free while it is "
            "assigned to an instance and costs $4 per month while it is unassigned."
        ),
        (
            "Q: Is there a bandwidth allowance?\nA: Each instance adds to a pooled outbound transfer "
            "allowance, starting at 1,000 GB for the s-1 size. Transfer overage is billed at $0.01 "
            "per GB."
        ),
        (
            "Q: Can I bring my own IP addresses?\nA: Bring-your-own-IP is available for IPv4 prefixes "
            "of /24 or larger. The prefix must be registered with RIPE, ARIN or APNIC, and setup "
            "takes about 2 weeks."
        ),
        (
            "Q: Is there DDoS protection?\nA: Network-level DDoS protection is included for every "
            "resource at no charge. Application-layer protection is not included."
        ),
    ],
)

doc(
    "faq/database.md",
    "faq",
    "zendesk",
    "Database FAQ",
    short_header("Database FAQ"),
    [
        (
            "Q: Can I connect to Managed PostgreSQL from outside Northwind Cloud?\nA: Yes, through "
            "trusted sources. Only IP addresses on the trusted sources list can connect, and the list "
            "is empty by default."
        ),
        (
            "Q: Do you offer MySQL?\nA: Managed MySQL was retired on 31 January 2024. Customers "
            "migrated their remaining MySQL clusters to self-managed instances."
        ),
        (
            "Q: How do I create a read replica?\nA: Read replicas can be added from the cluster page or "
            "with nwctl db replica create. A cluster can have up to 5 read replicas, and replicas can "
            "be placed in other regions."
        ),
        (
            "Q: Can I change the PostgreSQL major version myself?\nA: Yes. In-place major version "
            "upgrades are started from the Settings tab of the cluster. The cluster is read-only "
            "during the upgrade."
        ),
    ],
)

# --------------------------------------------------------------------------- release notes
doc(
    "release-notes/nwctl-3.4.md",
    "release_notes",
    "github",
    "nwctl 3.4.0 release notes",
    short_header("nwctl 3.4.0"),
    [
        (
            "nwctl 3.4.0 was released on 12 February 2024. It adds the nwctl snapshot copy command for "
            "copying snapshots between regions, with progress output and a --wait flag."
        ),
        (
            "The --wait flag is now supported by every create command. Support for macOS 11 has been "
            "dropped, and the minimum supported version is now macOS 12."
        ),
        (
            "Bug fixes: nwctl db list no longer hides clusters that are being resized. Thanks to José "
            "Müller for reporting the pagination bug in nwctl volume list."
        ),
        (
            "Upgrade with brew upgrade nwctl or scoop update nwctl. The Debian package is now signed "
            "with a new key, fingerprint 7C1E 44B2, which must be imported before updating with apt."
        ),
    ],
)

doc(
    "release-notes/nwctl-3.5.md",
    "release_notes",
    "github",
    "nwctl 3.5.0 release notes",
    short_header("nwctl 3.5.0"),
    [
        (
            "nwctl 3.5.0 was released on 6 May 2024. It introduces shell completion for fish and "
            "PowerShell and a new nwctl cost estimate command."
        ),
        (
            "The nwctl cost estimate command prints the projected monthly cost of a Terraform plan or a "
            "YAML spec. The estimate does not include taxes or support plan fees."
        ),
        (
            "Deprecation: the --format flag is deprecated in favour of --output and will be removed in "
            "nwctl 4.0, which is planned for early 2025."
        ),
        (
            "Other changes: nwctl instance list gained a --tag filter, and nwctl db connect now opens "
            "psql with the correct TLS settings. Thanks to Chloé Martin for the contribution to the "
            "fish completion script."
        ),
    ],
)

doc(
    "release-notes/2024-q1-platform.md",
    "release_notes",
    "github",
    "Platform release notes — Q1 2024",
    long_header(
        "Platform release notes — Q1 2024",
        "Product Marketing (Olivia Grant)",
        "Release management (Tomás Ferreira)",
        "2024-04-03",
        "n/a (archived quarterly)",
        ["Object Storage", "Managed PostgreSQL", "Load Balancers", "Deprecations"],
    ),
    [
        (
            "In Q1 2024 Object Storage gained bucket replication between fra1 and ams2. Bucket "
            "replication copies new objects within 15 minutes on average and is billed as outbound "
            "transfer."
        ),
        (
            "Managed PostgreSQL 16 became generally available on 20 March 2024. PostgreSQL 13 reached "
            "end of support on 31 March 2024, and the remaining PostgreSQL 13 clusters were upgraded to "
            "version 14."
        ),
        (
            "Load balancers now support HTTP/3 in beta. The beta is free and must be enabled per load "
            "balancer from the Settings tab."
        ),
    ],
)

doc(
    "release-notes/2024-q2-platform.md",
    "release_notes",
    "github",
    "Platform release notes — Q2 2024",
    short_header("Platform release notes — Q2 2024"),
    [
        (
            "In Q2 2024 we launched the tyo1 region and introduced Premium Intel instances with "
            "5th-generation Xeon processors. Premium Intel instances cost 20% more than Standard "
            "instances of the same size."
        ),
        (
            "Lighthouse now supports uptime checks for public HTTP endpoints. Each account can create 10 "
            "uptime checks for free, and additional uptime checks cost $1 per month each."
        ),
        (
            "The control panel gained a dark mode, and the activity log can now be exported as a CSV "
            "file from the Security page."
        ),
        (
            "Managed PostgreSQL clusters can now be forked from a backup into a different region. "
            "Forking is billed like a regular cluster creation."
        ),
        (
            "Deprecations: the v1 billing API will stop working on 31 December 2024. Integrations "
            "should move to the v2 billing API, which returns amounts in cents."
        ),
    ],
)

doc(
    "release-notes/nks-1.29.md",
    "release_notes",
    "github",
    "NKS: Kubernetes 1.29",
    short_header("NKS: Kubernetes 1.29 available"),
    [
        (
            "NKS supports Kubernetes 1.29 from 8 April 2024. New clusters default to version 1.29.3, "
            "and existing clusters can be upgraded from the control panel."
        ),
        (
            "Kubernetes 1.26 reaches end of life on NKS on 30 June 2024. Clusters still on 1.26 will be "
            "upgraded to 1.27 automatically after that date."
        ),
        (
            "The Cilium CNI was upgraded to version 1.15, which adds Gateway API support. Dockershim is "
            "not available on any supported version."
        ),
        (
            "Known issue: node pools created before 2 April 2024 may show an outdated Kubernetes "
            "version in the control panel for up to one hour after an upgrade. The node version "
            "reported by kubectl is correct."
        ),
        (
            "Upgrades to 1.29 drain nodes one at a time. The surge upgrade setting adds up to 10 "
            "extra nodes during the upgrade at no charge."
        ),
    ],
)

doc(
    "release-notes/postgres-16.md",
    "release_notes",
    "confluence",
    "Managed PostgreSQL 16 rollout notes",
    short_header("Managed PostgreSQL 16 rollout notes", "2024-03-20"),
    [
        (
            "PostgreSQL 16 clusters can be created in every region except tyo1. Existing clusters can be "
            "upgraded in place from version 14 or 15 with a downtime of about 5 minutes."
        ),
        (
            "The pgvector extension on PostgreSQL 16 ships at version 0.7.0. Logical replication slots "
            "now survive a failover to a standby node."
        ),
        (
            "Connection pooling on PostgreSQL 16 clusters uses PgBouncer 1.22. Query statistics from "
            "pg_stat_statements are now shown on the Insights tab of the cluster."
        ),
        (
            "Rollout schedule: fra1 and ams2 on 20 March 2024, nyc3 and tor1 on 25 March 2024, and "
            "sgp1 on 27 March 2024."
        ),
    ],
)

# --------------------------------------------------------------------------- postmortems
doc(
    "postmortems/2024-02-14-fra1-storage.md",
    "postmortem",
    "confluence",
    "Postmortem: fra1 Object Storage degradation",
    long_header(
        "Postmortem: fra1 Object Storage degradation",
        "Storage team (Aiko Tanaka)",
        "Site Reliability (Priya Raman)",
        "2024-02-21",
        "n/a (closed)",
        ["Summary", "Timeline", "Root cause", "Action items"],
    ),
    [
        (
            "On 14 February 2024 between 09:12 and 11:47 UTC, Object Storage in fra1 returned 503 "
            "errors for about 38% of requests. No customer data was lost."
        ),
        (
            "The root cause was a metadata database that ran out of disk space after a compaction job "
            "failed silently. The on-call engineer, Aiko Tanaka, restored service by adding capacity and "
            "restarting the compaction job."
        ),
        (
            "Action items: alert on compaction failures (owner: Storage team, due 1 March 2024) and add "
            "a disk usage alert at 80% on every metadata node. Affected customers received a 10% "
            "service credit automatically."
        ),
    ],
)

doc(
    "postmortems/2024-05-09-dns-outage.md",
    "postmortem",
    "confluence",
    "Postmortem: global DNS resolution outage",
    long_header(
        "Postmortem: global DNS resolution outage",
        "Networking team (Samuel Okafor)",
        "Site Reliability (Priya Raman)",
        "2024-05-16",
        "n/a (closed)",
        ["Summary", "Impact", "Root cause", "Remediation"],
    ),
    [
        (
            "On 9 May 2024 Northwind DNS failed to answer queries for 23 minutes, from 14:02 to 14:25 "
            "UTC. All hosted zones were affected in every region."
        ),
        (
            "A configuration push removed the anycast route announcements for ns1, ns2 and ns3 at the "
            "same time. The change had passed review but was deployed to all sites at once."
        ),
        (
            "Deploys to DNS edge nodes now roll out to one point of presence at a time with a 10-minute "
            "bake time. Customers on Business and Premium support received a written incident report "
            "within 5 business days."
        ),
    ],
)

doc(
    "postmortems/2023-11-21-billing-double-charge.md",
    "postmortem",
    "confluence",
    "Postmortem: duplicate card charges",
    short_header("Postmortem: duplicate card charges (2023-11-21)"),
    [
        (
            "On 21 November 2023 a retry bug in the payment service charged 1,204 customers twice for "
            "their October invoice. All duplicate charges were refunded by 24 November 2023."
        ),
        (
            "The payment processor’s idempotency key was regenerated on every retry, so the processor "
            "treated each retry as a new charge. The fix reuses the same idempotency key for every retry "
            "of an invoice."
        ),
        (
            "The Billing team, led by Marta Kowalski, now reconciles card charges against invoices every "
            "hour and pages the on-call engineer when they differ."
        ),
        (
            "Timeline: the faulty payment service release went out at 06:40 UTC. Support noticed a "
            "spike in tickets at 08:15 UTC, and the release was rolled back at 09:02 UTC."
        ),
    ],
)

doc(
    "postmortems/2024-07-30-lb-tls.md",
    "postmortem",
    "github",
    "Postmortem: expired certificates on load balancers",
    short_header("Postmortem: expired certificates on load balancers"),
    [
        (
            "On 30 July 2024 about 1,900 load balancers served expired Let’s Encrypt certificates for "
            "up to 6 hours. Renewal jobs had been failing since 1 July because of a rate limit on the "
            "ACME account."
        ),
        (
            "Certificate renewals now start 30 days before expiry instead of 7 days. An alert fires when "
            "any certificate is within 14 days of expiry, and the ACME account limits were raised."
        ),
        (
            "Impact: clients with strict certificate validation could not connect to the affected "
            "load balancers. Customers whose certificates were uploaded manually were not affected."
        ),
        (
            "Customers affected by the expired certificates received a service credit of 10% of their "
            "monthly load balancer charges, applied to the August invoice."
        ),
    ],
)

# =========================================================================== questions + run
# Short names for documents, used in the retrieved lists below.
A = {
    "it": "manuals/compute/instance-types.md",
    "snap": "manuals/compute/snapshots.md",
    "obj": "manuals/storage/object-storage.md",
    "life": "manuals/storage/lifecycle-rules.md",
    "blk": "manuals/storage/block-volumes.md",
    "pg": "manuals/database/managed-postgres.md",
    "bak": "manuals/database/backups-pitr.md",
    "lb": "manuals/networking/load-balancers.md",
    "vpc": "manuals/networking/vpc.md",
    "dns": "manuals/networking/dns.md",
    "nks": "manuals/kubernetes/nks-overview.md",
    "cli": "manuals/cli/nwctl.md",
    "lh": "manuals/monitoring/lighthouse-alerts.md",
    "cdn": "manuals/cdn/edge-cache.md",
    "tyo": "manuals/regions/tokyo-region.md",
    "ref": "policies/refunds.md",
    "sla": "policies/sla.md",
    "aup": "policies/acceptable-use.md",
    "ret": "policies/data-retention.md",
    "pw": "policies/security/password-and-2fa.md",
    "sup": "policies/support-tiers.md",
    "vdp": "policies/security/vulnerability-disclosure.md",
    "inv": "policies/invoicing.md",
    "del": "policies/account-deletion.md",
    "fbil": "faq/billing.md",
    "fsto": "faq/storage.md",
    "fk8s": "faq/kubernetes.md",
    "facc": "faq/account.md",
    "fnet": "faq/networking.md",
    "fdb": "faq/database.md",
    "n34": "release-notes/nwctl-3.4.md",
    "n35": "release-notes/nwctl-3.5.md",
    "q1": "release-notes/2024-q1-platform.md",
    "q2": "release-notes/2024-q2-platform.md",
    "k129": "release-notes/nks-1.29.md",
    "pg16": "release-notes/postgres-16.md",
    "pmS": "postmortems/2024-02-14-fra1-storage.md",
    "pmD": "postmortems/2024-05-09-dns-outage.md",
    "pmB": "postmortems/2023-11-21-billing-double-charge.md",
    "pmT": "postmortems/2024-07-30-lb-tls.md",
}

C, R, M, S, H, U = (
    "correct",
    "rank_failure",
    "retrieval_miss",
    "synthesis_error",
    "hallucination",
    "unjudged",
)
SC = "correct+source_conflict"

# Retrieved items, in rank order:
#   "obj:1"                 -> {"chunk_id"} of the chunk holding paragraph 1 of obj
#   ("span", "blk:0")       -> {"doc_id","char_start","char_end"} of that whole chunk
#   ("para", "sla:0")       -> {"doc_id","char_start","char_end"} of just that paragraph
#   ("text", "ret", "...")  -> {"text","doc_id"};  ("text", None, "...") -> {"text"} only
# A trailing "!" / "-" on a chunk ref sets per-item in_context true / false (then the
# record has no context_k).
QUESTIONS = [
    {
        "id": "q01",
        "topic": "storage",
        "difficulty": "easy",
        "question": "What does the base Object Storage subscription include?",
        "reference": "The base Object Storage subscription costs $5 per month and includes 250 GB "
        "of storage and 1 TB of outbound transfer, and storage beyond the included "
        "250 GB is billed at $0.02 per GB per month.",
        "claims": [
            (
                (
                    "The base Object Storage subscription costs $5 per month and includes 250 GB of "
                    "storage and 1 TB of outbound transfer."
                ),
                R,
            ),
            ("Storage beyond the included 250 GB is billed at $0.02 per GB per month.", C),
        ],
        "retrieved": ["obj:1", "fsto:1", "cdn:0", "obj:0", "life:2", "q1:0"],
    },
    {
        "id": "q02",
        "topic": "compute",
        "difficulty": "easy",
        "question": "How much does the smallest Compute instance cost?",
        "claims": [
            ("The smallest size, s-1, has 1 vCPU and 2 GB of RAM and costs $6 per month.", R),
            ("Instances are billed per second with a minimum charge of 60 seconds.", C),
        ],
        "retrieved": ["it:2", "fnet:2", "it:1", "q2:0", ("span", "it:0"), "snap:0"],
    },
    {
        "id": "q03",
        "topic": "database",
        "difficulty": "easy",
        "question": "What is the cheapest way to run Managed PostgreSQL?",
        "claims": [
            (
                (
                    "A single-node Managed PostgreSQL cluster starts at $15 per month with 1 vCPU, "
                    "1 GB of RAM and 10 GB of storage."
                ),
                R,
            ),
            (
                (
                    "Automatic failover promotes a standby node within 60 seconds when the primary "
                    "stops responding."
                ),
                S,
            ),
        ],
        "retrieved": ["pg:1", "fdb:0", "pg16:0", "bak:0", "pg:0", "pg:3"],
    },
    {
        "id": "q04",
        "topic": "networking",
        "difficulty": "easy",
        "question": "How much does a load balancer cost and how many connections can it handle?",
        "reference": "A load balancer costs $12 per month per node, and each node handles up to "
        "10,000 concurrent connections.",
        "claims": [
            ("A load balancer costs $12 per month per node.", R),
            ("Each node handles up to 10,000 concurrent connections.", R),
        ],
        "retrieved": ["lb:1", "pmT:0", "q1:2", "lb:0", "fk8s:5", "cdn:0"],
    },
    {
        "id": "q05",
        "topic": "kubernetes",
        "difficulty": "easy",
        "question": "How much does the highly available NKS control plane cost?",
        "reference": "The standard NKS control plane is free, and the highly available control "
        "plane costs $40 per month per cluster.",
        "claims": [
            ("The standard NKS control plane is free.", C),
            ("The highly available control plane costs $30 per month per cluster.", SC),
        ],
        "retrieved": ["fk8s:0", "k129:0", "fk8s:2", "nks:0", "q2:0"],
    },
    {
        "id": "q06",
        "topic": "billing",
        "difficulty": "easy",
        "question": "How much does Business support cost?",
        "reference": "Business support costs $100 per month and includes 4-hour responses to "
        "urgent tickets.",
        "claims": [
            ("Business support costs $80 per month.", SC),
            ("Business support includes 4-hour responses to urgent tickets.", C),
        ],
        "retrieved": ["fbil:1", "inv:0", "pmD:2", "vdp:0", "del:0"],
    },
    {
        "id": "q07",
        "topic": "security",
        "difficulty": "easy",
        "question": "What are the password rules for the control panel?",
        "reference": "Control panel passwords must be at least 12 characters long and are checked "
        "against known breached passwords.",
        "claims": [
            ("Control panel passwords must be at least 12 characters long.", C),
            ("After 5 failed login attempts the account is locked for 30 minutes.", S),
        ],
        "retrieved": ["pw:0", "pw:2", "facc:2", "aup:0", "vdp:0"],
    },
    {
        "id": "q08",
        "topic": "storage",
        "difficulty": "easy",
        "question": "What is the maximum size of a Block Storage volume?",
        "reference": "A Block Storage volume can be up to 16 TB.",
        "claims": [
            (
                ("Block Storage volumes range from 1 GB to 16 TB and cost $0.10 per GB per month."),
                R,
            ),
            (
                (
                    "Volumes can be grown online without downtime, but a volume cannot be shrunk "
                    "once it has been grown."
                ),
                C,
            ),
        ],
        "retrieved": ["blk:1", "snap:2", "fsto:0", ("span", "blk:0"), "it:2"],
    },
    {
        "id": "q09",
        "topic": "monitoring",
        "difficulty": "easy",
        "question": "How long does Lighthouse keep instance metrics?",
        "claims": [
            (
                (
                    "Lighthouse collects metrics at one-minute resolution and keeps them for 30 "
                    "days."
                ),
                R,
            ),
            ("Each account can create 10 uptime checks for free.", M),
            ("Older metrics can be exported to Object Storage as Parquet files.", H),
        ],
        "retrieved": ["lh:1", "cli:2", "sla:0", "lh:0", "pmS:2"],
    },
    {
        "id": "q10",
        "topic": "billing",
        "difficulty": "hard",
        "question": "Do I get unused prepaid credit back when I close my account?",
        "reference": "Unused prepaid credit is refunded within 60 days of purchase when the account "
        "is closed.",
        "claims": [
            (
                (
                    "Northwind Cloud refunds unused prepaid credit within 60 days of purchase when "
                    "an account is closed."
                ),
                R,
            ),
            (("Refunds are returned to the original payment method within 10 business days."), M),
        ],
        "retrieved": ["del:1", "del:3", "fbil:2", "ref:0", "inv:0", "ret:0"],
    },
    {
        "id": "q11",
        "topic": "reliability",
        "difficulty": "easy",
        "question": "What uptime does the SLA promise for Object Storage?",
        "reference": "Object Storage has a 99.95% monthly uptime commitment.",
        "claims": [
            (
                (
                    "Northwind Cloud commits to 99.95% monthly uptime for Object Storage and "
                    "Managed PostgreSQL."
                ),
                R,
            ),
            (
                (
                    "If monthly uptime falls below the commitment, customers receive service "
                    "credits."
                ),
                C,
            ),
        ],
        "retrieved": ["sla:1", "pmS:0", "pmS:1", ("para", "sla:0"), "obj:0"],
    },
    {
        "id": "q12",
        "topic": "privacy",
        "difficulty": "hard",
        "question": "What happens to my data after I close my account?",
        "claims": [
            ("Northwind Cloud keeps customer data for 30 days after an account is closed.", R),
            (("A final export of all buckets is emailed to the team owner as a download link."), H),
        ],
        "retrieved": ["del:1", "del:2", "facc:1", "ret:0", "ret:1", "inv:2"],
    },
    {
        "id": "q13",
        "topic": "support",
        "difficulty": "easy",
        "question": "Which support plans does Northwind Cloud offer?",
        "claims": [
            ("Northwind Cloud offers three support plans: Basic, Business and Premium.", R),
            ("Premium customers get a named technical account manager.", C),
        ],
        "retrieved": [
            "sup:2",
            "fbil:1",
            "pmD:2",
            (
                "text",
                "sup",
                (
                    "Northwind Cloud offers three support plans: Basic, Business "
                    "and Premium. Basic support is free and answers tickets "
                    "within 24 hours on business days."
                ),
            ),
            "vdp:0",
        ],
    },
    {
        "id": "q14",
        "topic": "storage",
        "difficulty": "hard",
        "byo": True,
        "question": "What happened during the February 2024 Object Storage incident in fra1?",
        "reference": "A metadata database ran out of disk space after a compaction job failed "
        "silently, and Aiko Tanaka restored service.",
        "claims": [
            (
                (
                    "On 14 February 2024 Object Storage in fra1 returned 503 errors for about 38% "
                    "of requests."
                ),
                R,
            ),
            (
                (
                    "The root cause was a metadata database that ran out of disk space after a "
                    "compaction job failed silently."
                ),
                C,
            ),
            (
                (
                    "The on-call engineer, Kenji Watanabe, restored service by adding capacity and "
                    "restarting the compaction job."
                ),
                S,
            ),
        ],
        "retrieved": ["pmS:1", "obj:3", "life:1", "pmS:0", "sla:1"],
    },
    {
        "id": "q15",
        "topic": "networking",
        "difficulty": "hard",
        "question": "How long did the May 2024 DNS outage last?",
        "reference": "The DNS outage on 9 May 2024 lasted 23 minutes.",
        "claims": [
            ("On 9 May 2024 Northwind DNS failed to answer queries for 23 minutes.", R),
            ("Deploys to DNS edge nodes now roll out to one point of presence at a time.", C),
            ("Changes propagate to all name servers within 60 seconds.", M),
        ],
        "retrieved": ["pmD:1!", "dns:2!", "pmS:0!", "pmD:0-", "cdn:0-"],
    },
    {
        "id": "q16",
        "topic": "kubernetes",
        "difficulty": "hard",
        "question": "How large can an NKS cluster get?",
        "reference": "An NKS cluster supports up to 512 nodes across all node pools.",
        "claims": [
            ("Each NKS cluster supports up to 1,000 nodes across all node pools.", S),
            ("The cluster autoscaler checks for pending pods every 10 seconds.", C),
            ("Each NKS node runs at most 110 pods.", M),
        ],
        "retrieved": ["nks:1", "k129:3", "fk8s:0", "it:1", "nks:0"],
    },
    {
        "id": "q17",
        "topic": "cli",
        "difficulty": "easy",
        "question": "How do I log in with nwctl?",
        "claims": [
            (
                (
                    "Authenticate with nwctl auth login, which stores a personal access token in "
                    "~/.config/nwctl/config.yaml."
                ),
                C,
            ),
            (
                (
                    "Personal access tokens created by nwctl auth login expire after 30 days unless "
                    "you pass the --no-expiry flag."
                ),
                S,
            ),
            ("Biometric login with a fingerprint reader is supported as well.", H),
        ],
        "retrieved": ["cli:1", "cli:3", "pw:3", "n34:0", "n35:0"],
    },
    {
        "id": "q18",
        "topic": "billing",
        "difficulty": "easy",
        "question": "When are invoices issued and when is payment due?",
        "reference": "Invoices are issued on the first day of each month for the previous month’s "
        "usage, and payment is due within 14 days of the invoice date.",
        "claims": [
            (
                (
                    "Invoices are issued on the first day of each month for the previous month’s "
                    "usage."
                ),
                C,
            ),
            ("Payment is due within 30 days of the invoice date.", S),
            ("Corrections to an invoice can be requested within 60 days of its issue date.", M),
        ],
        "retrieved": ["inv:0", "fbil:0", "pmB:0", "q2:3", "ref:1"],
    },
    {
        "id": "q19",
        "topic": "security",
        "difficulty": "easy",
        "question": "Is SMS accepted for two-factor authentication?",
        "claims": [
            ("SMS is not accepted as a second factor.", C),
            (
                (
                    "Two-factor authentication with a TOTP app or a hardware security key is "
                    "mandatory for all team owners since 1 September 2024."
                ),
                C,
            ),
            ("👍👍", U),
        ],
        "retrieved": ["pw:1", "facc:2", "vdp:0", "aup:1", "pw:2"],
    },
    {
        "id": "q20",
        "topic": "networking",
        "difficulty": "easy",
        "question": "Does Northwind Cloud support IPv6?",
        "claims": [
            ("Every instance in fra1, ams2 and nyc3 can have one IPv6 /64 at no charge.", C),
            ("Network-level DDoS protection is included for every resource at no charge.", M),
        ],
        "retrieved": ["fnet:0", "vpc:0", "tyo:0", "it:0", "lb:0"],
    },
    {
        "id": "q21",
        "topic": "storage",
        "difficulty": "hard",
        "byo": True,
        "question": "How do bucket lifecycle rules work?",
        "claims": [
            ("Lifecycle rules delete objects automatically based on their age.", C),
            ("A recycle bin keeps removed files for 72 hours.", H),
        ],
        "retrieved": ["life:0", "fsto:1", "obj:2", "life:2", "fsto:3"],
    },
    {
        "id": "q22",
        "topic": "compute",
        "difficulty": "hard",
        "question": "Does Northwind Compute support nested virtualisation?",
        "claims": [
            ("Northwind Compute does not support nested virtualisation on any family.", C),
            ("Resizing to a larger size does not require a reboot.", S),
        ],
        "retrieved": ["it:3", "it:1", "snap:1", "k129:0", "blk:1"],
    },
    {
        "id": "q23",
        "topic": "database",
        "difficulty": "hard",
        "question": "Can I use TimescaleDB on Managed PostgreSQL?",
        "claims": [
            ("TimescaleDB is supported as an extension.", S),
            (
                (
                    "Extensions can be enabled from an allow-list of 48 extensions, including "
                    "PostGIS and pgvector."
                ),
                C,
            ),
        ],
        "retrieved": ["pg:2", "pg16:1", "fdb:2", "pg:0", "bak:0"],
    },
    {
        "id": "q24",
        "topic": "kubernetes",
        "difficulty": "easy",
        "question": "Which CNI plugin does NKS use?",
        "reference": "NKS uses Cilium as its CNI plugin, and Cilium cannot be replaced.",
        "claims": [
            ("NKS uses Cilium as its CNI plugin.", M),
            ("Cilium can be swapped for Calico by opening a support ticket.", H),
        ],
        "retrieved": ["k129:2", "nks:1", "nks:0", "fk8s:5", "it:0"],
    },
    {
        "id": "q25",
        "topic": "database",
        "difficulty": "easy",
        "question": "Does Northwind Cloud offer managed MySQL?",
        "reference": "No, Managed MySQL was retired on 31 January 2024.",
        "claims": [
            ("Managed MySQL was retired on 31 January 2024.", M),
            ("Northwind Cloud recommends migrating MySQL workloads to its MariaDB service.", H),
        ],
        "retrieved": ["pg:0", "q1:1", "pg16:0", "bak:0", "pg:3"],
    },
    {
        "id": "q26",
        "topic": "security",
        "difficulty": "easy",
        "question": "How do I report a security vulnerability?",
        "claims": [
            (
                (
                    "Security researchers can report vulnerabilities to security@northwind.cloud or "
                    "through our HackerOne programme."
                ),
                C,
            ),
            ("Critical findings are paid out within 48 hours by bank transfer.", H),
        ],
        "retrieved": ["vdp:0", "pw:2", "aup:3", "vdp:2", "inv:0"],
    },
    {
        "id": "q27",
        "topic": "regions",
        "difficulty": "easy",
        "question": "When did the Tokyo region open and what does it offer?",
        "reference": "The 東京 region (tyo1) opened on 15 April 2024.",
        "claims": [
            ("The 東京 region, tyo1, opened on 15 April 2023.", S),
            ("Managed PostgreSQL and NKS are not yet available in tyo1.", C),
            ("Network latency from tyo1 to sgp1 is about 70 milliseconds.", M),
        ],
        "retrieved": ["tyo:0", "q2:0", "pg16:0", "it:0", "lb:0"],
    },
    {
        "id": "q28",
        "topic": "billing",
        "difficulty": "easy",
        "question": "Is there a free trial?",
        "claims": [
            ("New accounts receive $200 of free trial credit that is valid for 60 days.", C),
            ("Students get an extra $100 through the GitHub Student Developer Pack.", H),
        ],
        "retrieved": [
            "fbil:2",
            (
                "text",
                None,
                (
                    "Promotional credit, including the free trial "
                    "credit, has no cash value and is not refundable."
                ),
            ),
            "fbil:1",
            "q2:0",
            "ref:0",
        ],
    },
    {
        "id": "q29",
        "topic": "networking",
        "difficulty": "hard",
        "question": "Is there a managed NAT gateway?",
        "reference": "There is no managed NAT gateway, so instances without a public IPv4 address "
        "use a self-managed gateway instance in the same VPC.",
        "claims": [
            ("Northwind Cloud does not provide a managed NAT gateway.", M),
            (
                (
                    "Instances without a public IPv4 address reach the internet through a "
                    "self-managed gateway instance in the same VPC."
                ),
                M,
            ),
        ],
        "retrieved": ["lb:0", "fnet:0", "fnet:3", "lb:1", "dns:0"],
    },
    {
        "id": "q30",
        "topic": "cdn",
        "difficulty": "easy",
        "question": "How quickly does a CDN purge take effect?",
        "claims": [
            ("Purging a path removes it from every point of presence within 60 seconds.", C),
            ("Each account can purge up to 10,000 paths per hour.", S),
            ("Purges can also be triggered automatically by a webhook from GitHub Actions.", H),
        ],
        "retrieved": ["cdn:1", "obj:0", "cdn:2", "obj:3", "pmS:0"],
    },
    {
        "id": "q31",
        "topic": "compliance",
        "difficulty": "hard",
        "question": "How long are billing records kept?",
        "reference": "Billing records are kept for 10 years.",
        "claims": [
            ("Billing records are kept for 10 years to meet German tax law.", R),
            ("Invoices are sent as PDF files to the billing email address.", M),
        ],
        "retrieved": [
            "ret:0",
            "pmB:0",
            "inv:0",
            "fbil:0",
            ("text", "ret", ("Billing records are kept for 10 years to meet German tax law.")),
            "del:0",
        ],
    },
    {
        "id": "q32",
        "topic": "billing",
        "difficulty": "hard",
        "byo": True,
        "question": "Why were some customers charged twice in November 2023?",
        "reference": "On 21 November 2023 a retry bug in the payment service charged 1,204 "
        "customers twice for their October invoice, and the fix reuses the same "
        "idempotency key for every retry of an invoice.",
        "claims": [
            (
                (
                    "On 21 November 2023 a retry bug in the payment service charged 1,204 customers "
                    "twice for their October invoice."
                ),
                C,
            ),
            ("The fix reuses the same idempotency key for every retry of an invoice.", C),
            ("All duplicate charges were refunded by 30 November 2023.", S),
        ],
        "retrieved": ["pmB:0", "inv:2", "ref:1", "sup:1", "pmT:1"],
    },
    {
        "id": "q33",
        "topic": "networking",
        "difficulty": "hard",
        "question": "What went wrong with load balancer certificates in July 2024?",
        "claims": [
            (
                (
                    "On 30 July 2024 about 1,900 load balancers served expired Let’s Encrypt "
                    "certificates for up to 6 hours."
                ),
                C,
            ),
            ("Certificate renewals now start 60 days before expiry instead of 7 days.", S),
            ("The incident was detected by a customer tweet.", H),
        ],
        "retrieved": ["pmT:0!", "lb:2-", "pmT:2!", "lb:0-", "sla:1-"],
    },
    {
        "id": "q34",
        "topic": "account",
        "difficulty": "easy",
        "question": "How many members can a team have?",
        "claims": [
            ("Each team can have up to 50 members.", C),
            (
                ("Guest members with read-only access do not count towards the team member limit."),
                H,
            ),
        ],
        "retrieved": ["facc:0", "facc:3", "del:0", "pw:1", "sup:1"],
    },
    {
        "id": "q35",
        "topic": "storage",
        "difficulty": "easy",
        "question": "Can I mount an Object Storage bucket as a file system?",
        "claims": [
            ("Tools like s3fs work, but Northwind support does not troubleshoot them.", C),
            (("Northwind recommends the open-source rclone mount command for production use."), H),
        ],
        "retrieved": ["fsto:2", "blk:1", "obj:0", "cdn:2", "life:2"],
    },
    {
        "id": "q36",
        "topic": "networking",
        "difficulty": "hard",
        "question": "How much does a reserved IPv4 address cost?",
        "claims": [
            ("A reserved IPv4 address is free while it is assigned to an instance.", C),
            ("An unassigned reserved IPv4 address costs $5 per month.", S),
            ("Bring-your-own-IP is available for IPv4 prefixes of /24 or larger.", M),
        ],
        "retrieved": ["fnet:1", "it:2", "vpc:0", "inv:0", "pmT:0"],
    },
]

# =========================================================================== generator

OUT = Path(__file__).resolve().parent.parent / "data" / "sample"
PARA_SPLIT = re.compile(r"(?:\r?\n){2,}")
MIN_CHUNK = 300  # merge paragraphs until a chunk has at least this many characters


def build_text(d: dict) -> str:
    nl = "\r\n" if d["crlf"] else "\n"
    header = nl.join(d["header"])
    paras = [p.replace("\n", nl) for p in d["paras"]]
    return (nl + nl).join([header] + paras) + nl


def split_paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of every blank-line separated block, trailing newlines excluded."""
    spans, pos = [], 0
    for m in PARA_SPLIT.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text.rstrip("\r\n"))))
    return [(s, e) for s, e in spans if e > s]


def chunk_doc(d: dict, text: str) -> tuple[list[dict], dict[int, str]]:
    """Chunks of one document and the map paragraph index -> chunk_id.

    Block 0 is the header; it always goes into the first chunk together with paragraph 0,
    so long boilerplate headers dilute the first chunk of their document."""
    blocks = split_paragraphs(text)
    assert len(blocks) == len(d["paras"]) + 1, (d["doc_id"], len(blocks))
    # header + paragraph 0 form one unit; the other paragraphs are units of their own
    units = [(blocks[0][0], blocks[1][1], [0])] + [
        (s, e, [i]) for i, (s, e) in enumerate(blocks[2:], 1)
    ]
    merged: list[list] = []
    for s, e, idx in units:
        if merged and merged[-1][1] - merged[-1][0] < MIN_CHUNK:
            merged[-1][1] = e
            merged[-1][2] = merged[-1][2] + idx
        else:
            merged.append([s, e, idx])
    # a short tail is glued to its predecessor when the result stays reasonable
    if (
        len(merged) > 1
        and merged[-1][1] - merged[-1][0] < 200
        and merged[-1][1] - merged[-2][0] <= 900
    ):
        merged[-2][1] = merged[-1][1]
        merged[-2][2] = merged[-2][2] + merged[-1][2]
        merged.pop()
    chunks, para_map = [], {}
    for n, (s, e, idx) in enumerate(merged):
        cid = f"{d['doc_id']}#{n}"
        chunks.append({"chunk_id": cid, "doc_id": d["doc_id"], "char_start": s, "char_end": e})
        for i in idx:
            para_map[i] = cid
    # every non-whitespace character is covered, chunks are ordered and non-empty
    covered = [False] * len(text)
    for c in chunks:
        assert text[c["char_start"] : c["char_end"]].strip(), c
        for k in range(c["char_start"], c["char_end"]):
            covered[k] = True
    assert all(cv or ch.isspace() for cv, ch in zip(covered, text)), d["doc_id"]
    assert all(a["char_end"] <= b["char_start"] for a, b in itertools.pairwise(chunks))
    return chunks, para_map


def parse_ref(ref: str) -> tuple[str, int, bool | None]:
    flag = None
    if ref.endswith("!"):
        ref, flag = ref[:-1], True
    elif ref.endswith("-"):
        ref, flag = ref[:-1], False
    alias, para = ref.split(":")
    return A[alias], int(para), flag


def build():
    docs = sorted(DOCS, key=lambda d: d["doc_id"])
    ids = [d["doc_id"] for d in docs]
    assert len(set(ids)) == len(ids), "duplicate doc_id"
    assert set(A.values()) <= set(ids), set(A.values()) - set(ids)
    texts, chunks, para_map, para_span = {}, [], {}, {}
    for d in docs:
        text = build_text(d)
        assert 600 <= len(text) <= 3000, (d["doc_id"], len(text))
        assert "\r" not in text or d["crlf"]
        texts[d["doc_id"]] = text
        cs, pm = chunk_doc(d, text)
        chunks += cs
        para_map[d["doc_id"]] = pm
        blocks = split_paragraphs(text)
        para_span[d["doc_id"]] = {i: blocks[i + 1] for i in range(len(d["paras"]))}
    by_id = {c["chunk_id"]: c for c in chunks}

    corpus_rows = [
        {
            "doc_id": d["doc_id"],
            "text": texts[d["doc_id"]],
            "doc_type": d["doc_type"],
            "source": d["source"],
            "title": d["title"],
            "header_lines": len(d["header"]),
        }
        for d in docs
    ]

    run_rows, label_rows, question_rows, plan = [], [], [], []
    assert len({q["id"] for q in QUESTIONS}) == len(QUESTIONS)
    for qn, q in enumerate(QUESTIONS):
        claims = [c for c, _ in q["claims"]]
        answer = " ".join(claims)
        items, passages, flags = [], [], []
        seen_chunks = set()
        for ref in q["retrieved"]:
            if isinstance(ref, str):
                doc_id, para, flag = parse_ref(ref)
                cid = para_map[doc_id][para]
                item = {"chunk_id": cid}
                c = by_id[cid]
                passage = (doc_id, c["char_start"], c["char_end"], cid)
            elif ref[0] == "span":  # the exact offsets of a chunk
                doc_id, para, flag = parse_ref(ref[1])
                c = by_id[para_map[doc_id][para]]
                cid = c["chunk_id"]
                item = {"doc_id": doc_id, "char_start": c["char_start"], "char_end": c["char_end"]}
                passage = (doc_id, c["char_start"], c["char_end"], cid)
            elif ref[0] == "para":  # a sub-range of a document: one paragraph, header excluded
                doc_id, para, flag = parse_ref(ref[1])
                s, e = para_span[doc_id][para]
                cid = para_map[doc_id][para]
                item = {"doc_id": doc_id, "char_start": s, "char_end": e}
                passage = (doc_id, s, e, None)
            elif ref[0] == "text":
                _, alias, snippet = ref
                flag = None
                if alias is None:
                    hits = [i for i, t in texts.items() if snippet in t]
                    assert len(hits) == 1 and texts[hits[0]].count(snippet) == 1, snippet
                    doc_id = hits[0]
                    item = {"text": snippet}
                else:
                    doc_id = A[alias]
                    assert snippet in texts[doc_id], snippet
                    item = {"text": snippet, "doc_id": doc_id}
                s = texts[doc_id].index(snippet)
                e = s + len(snippet)
                cid = next(
                    c["chunk_id"]
                    for c in chunks
                    if c["doc_id"] == doc_id and c["char_start"] <= s and e <= c["char_end"]
                )
                passage = (doc_id, s, e, None)
            else:
                raise ValueError(ref)
            assert passage[0] in texts and 0 <= passage[1] < passage[2] <= len(texts[passage[0]])
            assert cid not in seen_chunks, (q["id"], "retrieved twice", cid)
            seen_chunks.add(cid)
            items.append(item)
            passages.append(passage)
            flags.append(flag)
        assert 5 <= len(items) <= 8, q["id"]
        # deterministic, strictly descending scores
        score = 0.93 - (qn % 6) * 0.025
        for k, item in enumerate(items):
            item["score"] = round(score, 4)
            score -= 0.021 + ((qn + k) % 4) * 0.013
        scores = [item["score"] for item in items]
        assert all(a > b for a, b in itertools.pairwise(scores)), q["id"]
        per_item = any(f is not None for f in flags)
        if per_item:
            assert all(f is not None for f in flags), q["id"]
            for item, f in zip(items, flags):
                item["in_context"] = f
            in_ctx = flags
        else:
            in_ctx = [k < 3 for k in range(len(items))]
        rec = {"question_id": q["id"], "answer": answer, "retrieved": items}
        if not per_item:
            rec["context_k"] = 3
        if q.get("byo"):
            rec["claims"] = claims
            assert all(c in answer for c in rec["claims"])
        run_rows.append(rec)
        question_rows.append(
            {
                "question_id": q["id"],
                "question": q["question"],
                "reference_answer": q.get("reference", ""),
                "topic": q["topic"],
                "difficulty": q["difficulty"],
            }
        )
        for claim, label in q["claims"]:
            assert claim == claim.strip() and claim in answer
            assert ";" not in claim and "e.g." not in claim
            sc = label == SC
            label_rows.append(
                {
                    "question_id": q["id"],
                    "claim": claim,
                    "label": C if sc else label,
                    "source_conflict": sc,
                }
            )
        plan.append(
            {
                "q": q,
                "answer": answer,
                "passages": passages,
                "in_ctx": in_ctx,
                "retrieved_chunks": seen_chunks,
            }
        )
    return corpus_rows, chunks, question_rows, run_rows, label_rows, plan, texts


# =========================================================================== self-check
# A crude re-implementation of the local judge's rules, to catch labels that the data does
# not actually produce. It is NOT ragspan's judge; it only has to agree on clear cases.
_STOP_TEXT = """
    a an the and or but if then else of to in on at by for with from as is are was were be
    been being it its this that these those there here which who whom whose what when where
    why how can could may might must shall should will would do does did has have had having
    i you he she we they them their our your my me us his her so than too very also just
    only any all each every some such both either own same other into onto over under up
    down out off about after before again further once more most per via while within
    without between through during above below until not no never cannot none nor
    """
STOP = frozenset(_STOP_TEXT.split())
NEG = {"not", "no", "never", "cannot", "none", "nor", "n't"}
TOKEN = re.compile(r"[^\W_]+(?:[.,'’\-/][^\W_]+)*")
NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")


def stem(w: str) -> str:
    w = w.lower().replace("’", "'")
    w = w.removesuffix("'s")
    for suf in ("ations", "ation", "ies", "ing", "ed", "es", "s", "e"):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith("ss"):
            w = w[: -len(suf)] + ("y" if suf == "ies" else "")
            break
    return w


def toks(text: str) -> list[tuple[str, str, bool, bool, bool]]:
    """(norm, raw, is_stop, is_number, is_entity) per token."""
    out = []
    for m in TOKEN.finditer(text):
        raw = m.group(0)
        low = raw.lower()
        if NUMBER.match(raw):
            out.append((raw.replace(",", ""), raw, False, True, False))
        else:
            out.append((stem(low), raw, low in STOP, False, raw[0].isupper()))
    return out


def sentences(text: str) -> list[str]:
    parts = []
    for block in re.split(r"(?:\r?\n){2,}", text):
        parts += [s for s in re.split(r"(?<=[.!?])\s+", block) if s.strip()]
    return parts


def verdict(claim: str, passage: str) -> tuple[str, float]:
    ct = toks(claim)
    content = {t[0] for t in ct if not t[2]}
    if not content:
        return "nocontent", 0.0
    numbers = {t[0] for t in ct if t[3]}
    entities = {t[0] for i, t in enumerate(ct) if t[4] and not t[2] and (i > 0 or t[1].isupper())}
    negated = any(t[1].lower() in NEG for t in ct)
    sents = [toks(s) for s in sentences(passage)]
    windows = sents + [a + b for a, b in itertools.pairwise(sents)]
    best = ("unsupported", 0.0)
    for w in windows:
        norms = {t[0] for t in w}
        cov = len(content & norms) / len(content)
        if cov < 0.45:
            best = max(best, ("unsupported", cov), key=lambda x: (x[0] != "unsupported", x[1]))
            continue
        hits = [i for i, t in enumerate(w) if t[0] in content]
        stretch = w[max(0, hits[0] - 3) : hits[-1] + 1]
        ok = (
            numbers <= norms
            and entities <= norms
            and any(t[1].lower() in NEG for t in stretch) == negated
        )
        if ok and cov >= 0.75:
            return "supported", cov
        if best[0] != "partial" or cov > best[1]:
            best = ("partial", cov)
    return best


class BM25:
    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75):
        self.docs = [[t[0] for t in toks(d) if not t[2]] for d in docs]
        self.avg = sum(map(len, self.docs)) / len(self.docs)
        self.k1, self.b = k1, b
        df: dict[str, int] = {}
        for d in self.docs:
            for w in set(d):
                df[w] = df.get(w, 0) + 1
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def top(self, query: str, k: int) -> list[int]:
        q = [t[0] for t in toks(query) if not t[2]]
        scores = []
        for i, d in enumerate(self.docs):
            s = 0.0
            for w in set(q):
                f = d.count(w)
                if f:
                    s += (
                        self.idf[w]
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * len(d) / self.avg))
                    )
            scores.append((s, -i))
        return [-i for s, i in sorted(scores, reverse=True)[:k]]


def self_check(chunks, plan, texts, label_rows) -> list[str]:
    chunk_text = [texts[c["doc_id"]][c["char_start"] : c["char_end"]] for c in chunks]
    bm25 = BM25(chunk_text)
    expected = {(r["question_id"], r["claim"]): r for r in label_rows}
    problems = []
    for p in plan:
        q = p["q"]
        ptexts = [texts[d][s:e] for d, s, e, _ in p["passages"]]
        for claim, _ in q["claims"]:
            exp = expected[(q["id"], claim)]
            v = [verdict(claim, t) for t in ptexts]
            inside = [x for x, f in zip(v, p["in_ctx"]) if f]
            outside = [x for x, f in zip(v, p["in_ctx"]) if not f]
            everywhere = [verdict(claim, t) for t in chunk_text]
            if v and v[0][0] == "nocontent":
                got = U
            elif any(x[0] == "supported" for x in inside):
                got = C
            elif any(x[0] == "supported" for x in outside):
                got = R
            elif any(
                everywhere[i][0] == "supported"
                and chunks[i]["chunk_id"] not in p["retrieved_chunks"]
                for i in bm25.top(claim, 5)
            ):
                got = M
            elif any(x[0] == "partial" for x in inside):
                got = S
            else:
                got = H
            notes = []
            if got != exp["label"]:
                notes.append(f"simulated {got}")
            if exp["label"] in (S, H) and any(x[0] == "supported" for x in everywhere):
                notes.append("supported somewhere in the corpus")
            if exp["label"] == M and not any(x[0] == "supported" for x in everywhere):
                notes.append("no supporting chunk at all")
            if exp["label"] == H:
                top = max((x[1] for x in inside), default=0)
                if top >= 0.4:
                    notes.append(f"in-context coverage {top:.2f} is close to partial")
            if exp["label"] in (C, R):
                best = max((x[1] for x in v if x[0] == "supported"), default=0)
                if 0 < best < 0.8:
                    notes.append(f"support coverage only {best:.2f}")
            if exp["label"] == C and q.get("reference"):
                ref_v = verdict(claim, q["reference"])[0]
                if (ref_v == "partial") != exp["source_conflict"]:
                    notes.append(
                        f"reference verdict {ref_v} vs source_conflict {exp['source_conflict']}"
                    )
            if notes:
                problems.append(f"{q['id']} [{exp['label']}] {claim!r}: " + "; ".join(notes))
    return problems


def check_segmentation(run_rows, label_rows) -> list[str]:
    """Answers must split into exactly the expected claims (sentencex when installed)."""
    try:
        from sentencex import segment  # the segmenter ragspan uses; optional here
    except ImportError:

        def segment(_lang, text):
            return re.split(r"(?<=[.!?])\s+", text)

    problems = []
    for rec in run_rows:
        want = [r["claim"] for r in label_rows if r["question_id"] == rec["question_id"]]
        got = [s.strip() for s in segment("en", rec["answer"]) if s.strip()]
        if got != want:
            problems.append(f"{rec['question_id']}: segmented as {got}")
    return problems


# =========================================================================== writing
def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(
                {k: ("true" if v is True else "false" if v is False else v) for k, v in r.items()}
            )


def main() -> int:
    corpus_rows, chunks, question_rows, run_rows, label_rows, plan, texts = build()
    (OUT / "runs").mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "corpus.jsonl", corpus_rows)
    write_jsonl(OUT / "chunks.jsonl", chunks)
    write_csv(OUT / "questions.csv", question_rows)
    write_jsonl(OUT / "runs" / "baseline.jsonl", run_rows)
    write_csv(OUT / "expected_labels.csv", label_rows)

    counts: dict[str, int] = {}
    for r in label_rows:
        counts[r["label"]] = counts.get(r["label"], 0) + 1
    print(
        f"{len(corpus_rows)} documents, {len(chunks)} chunks, {len(question_rows)} questions, "
        f"{len(label_rows)} claims -> {OUT}"
    )
    for label in (C, R, M, S, H, U):
        print(f"  {label:16s} {counts.get(label, 0):3d}")
    print(f"  source_conflict  {sum(r['source_conflict'] for r in label_rows):3d}")
    problems = check_segmentation(run_rows, label_rows) + self_check(
        chunks, plan, texts, label_rows
    )
    for p in problems:
        print("CHECK:", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
