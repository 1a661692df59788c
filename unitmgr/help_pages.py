"""The `unit --help` pages and command specs, from the Typer app. GENERATED.

Written by `python -m unitmgr.help_text --write` (do not edit by hand); unitmgr/entry.py
prints the pages and parses plain command lines by the specs (registry/plain_argv.py) without
importing Typer, and the tests fail when they are stale. Typer caps its help at 80 columns, so a
page is exact on any terminal at least that wide; a narrower one gets Typer's own rendering.
"""

WIDTH = 80

PAGES: dict[str, str] = {
    "": (
        "Usage: unit [OPTIONS] COMMAND [ARGS]...\n"
        "\n"
        "  Create, monitor and dismantle units: one worktree, one branch, one executor\n"
        "  pair.\n"
        "\n"
        "Options:\n"
        "  --version             Print the version and exit.\n"
        "  --install-completion  Install completion for the current shell.\n"
        "  --show-completion     Show completion for the current shell, to copy it or\n"
        "                        customize the installation.\n"
        "  -h, --help            Show this message and exit.\n"
        "\n"
        "Commands:\n"
        "  create      Create a unit (or resume an interrupted create).\n"
        "  list        Every unit, with what is observed and how to recover it.\n"
        "  status      One unit (--unit ID) or a summary of every unit (--all).\n"
        "  dismantle   Take a unit apart: pair, worktree, branches, record.\n"
        "  restaff     Swap a unit's executor in place.\n"
        "  cancel      Stop the unit's in-flight turn.\n"
        "  addendum    Append to a unit's task.\n"
        "  scope       What a unit changed against its base.\n"
        "  verify      Run the unit's --validation on its HEAD and record the result.\n"
        "  wait        Block until a unit gets a receipt or changes lifecycle.\n"
        "  intake      Free slots and the ready issues that may start.\n"
        "  merge       Merge the unit's PR at --head when every gate passes.\n"
        "  watch       A live view of every unit for a person.\n"
        "  tail        A turn's transcript for a person.\n"
        "  serve       A read-only web dashboard.\n"
        "  config      The effective project settings.\n"
        "  doctor      Audit what can make git run something.\n"
        "  feedback    Send a unit its PR's failing CI and trusted review, once.\n"
        "  prune       Remove old archives, never a recorded unit's.\n"
        "  log         The event log, one line per event; --follow for new ones.\n"
        "  path        A unit's worktree path, and nothing else.\n"
        '  shell-init  A `unit cd ID` shell function: eval "$(unit shell-init bash)".\n'
    ),
    "create": (
        "Usage: unit create [OPTIONS]\n"
        "\n"
        "  Create a unit (or resume an interrupted create).\n"
        "\n"
        "Options:\n"
        "  --unit ID               The new unit's id: letters, digits and ._+- (64 at\n"
        "                          most). Required.\n"
        "  --worktree PATH         Where the new worktree goes; a relative path is\n"
        "                          taken from the current directory (optional when the\n"
        "                          config sets worktree_root).\n"
        "  --branch BRANCH         The new branch to create. Required for a new unit.\n"
        "  --base BRANCH           The branch to start from (origin's when it has one).\n"
        "                          Required for a new unit.\n"
        "  --scope TEXT            A one-line summary of the scope. Required for a new\n"
        "                          unit.\n"
        "  --validation COMMAND    The shell command that proves the work (unit\n"
        "                          verify). Required for a new unit unless the config\n"
        "                          sets it.\n"
        "  --lead LEAD             Who drives the unit. One of\n"
        "                          claude|codex|cursor|opencode|grok|human. Required\n"
        "                          for a new unit unless the config sets it.\n"
        "  --partner PARTNER       The executor's CLI. One of\n"
        "                          claude|codex|cursor|opencode|grok|script. Required\n"
        "                          for a new unit unless the config sets it.\n"
        "  --reason TEXT           Why this staffing (recorded). Required for a new\n"
        "                          unit.\n"
        "  --task TEXT             The task, inline (1 MiB at most). Required for a new\n"
        "                          unit (or --task-file).\n"
        "  --task-file FILE        The task, a text file (1 MiB at most), or - for\n"
        "                          standard input. Required for a new unit (or --task).\n"
        "  --paths GLOB            A glob the unit may write (repeatable; replaces\n"
        "                          config paths).\n"
        "  --model MODEL           The partner's model: an id, an alias, CLI-default or\n"
        "                          latest:<family>; for partner script, the executor's\n"
        "                          command line, run with sh -c in the worktree\n"
        "                          (required for partner script). Default: config\n"
        "                          model, unless --partner differs from the config's\n"
        "                          partner.\n"
        "  --effort EFFORT         Reasoning effort; required for claude, codex, grok\n"
        "                          and opencode. Default: config effort, unless\n"
        "                          --partner differs from the config's partner.\n"
        "  --identity NAME         The partner's login (other than default only with\n"
        "                          partner codex).\n"
        "  --issue N               The GitHub issue number the unit works on.\n"
        "  --setup COMMAND         A shell command run once in the new worktree.\n"
        "  --ports N               Lease N free TCP ports (UNIT_PORT, UNIT_PORTS;\n"
        "                          default: config ports, else 0).\n"
        "  --runner local|ray      Where its turns run: local or ray (SPEC 4.3;\n"
        "                          default: config runner, else local).\n"
        "  --node NAME             With --runner ray: the node (its unitmgr-node-NAME\n"
        "                          resource); default any node offering unitmgr-\n"
        "                          executor.\n"
        "  --max-active N          Refuse when this many units are active (default:\n"
        "                          config max_active, else 2).\n"
        "  --max-held N            Bounds the units held for review plus those still\n"
        "                          active: free slots = min(max_active - active,\n"
        "                          max_held - held - active) (default: config max_held,\n"
        "                          else 2).\n"
        "  --allow-overlap         Allow --paths that overlap another unit's.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "list": (
        "Usage: unit list [OPTIONS]\n"
        "\n"
        "  Every unit, with what is observed and how to recover it.\n"
        "\n"
        "Options:\n"
        "  --prs                   Also read each branch's PRs.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --format json|table     json (default) or table.  [default: json]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "status": (
        "Usage: unit status [OPTIONS]\n"
        "\n"
        "  One unit (--unit ID) or a summary of every unit (--all).\n"
        "\n"
        "Options:\n"
        "  --unit ID               One unit, read and brought up to date.\n"
        "  --all                   Every unit, lock-free, offline.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --format json|table     json (default) or table.  [default: json]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "dismantle": (
        "Usage: unit dismantle [OPTIONS]\n"
        "\n"
        "  Take a unit apart: pair, worktree, branches, record. Its processes and\n"
        "  manifest go too.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --force ID              Repeat the unit id to abandon unmerged work.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "restaff": (
        "Usage: unit restaff [OPTIONS]\n"
        "\n"
        "  Swap a unit's executor in place. A checkpoint of its work is handed over.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --lead LEAD             Must equal the recorded lead. Required.\n"
        "  --partner PARTNER       The new executor's CLI. One of\n"
        "                          claude|codex|cursor|opencode|grok|script. Required.\n"
        "  --reason TEXT           Why this staffing (recorded). Required.\n"
        "  --model MODEL           The partner's model: an id, an alias, CLI-default or\n"
        "                          latest:<family>; for partner script, the executor's\n"
        "                          command line, run with sh -c in the worktree\n"
        "                          (required for partner script).\n"
        "  --effort EFFORT         Reasoning effort; required for claude, codex, grok\n"
        "                          and opencode.\n"
        "  --identity NAME         The partner's login (other than default only with\n"
        "                          partner codex).\n"
        "  --runner local|ray      Move its turns: local or ray (default: the unit's\n"
        "                          own runner and node).\n"
        "  --node NAME             With --runner ray: the node (its unitmgr-node-NAME\n"
        "                          resource); default any node offering unitmgr-\n"
        "                          executor.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "cancel": (
        "Usage: unit cancel [OPTIONS]\n"
        "\n"
        "  Stop the unit's in-flight turn. Its whole process tree ends; its receipt\n"
        "  says cancelled.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --reason TEXT           Why; recorded in the receipt and the event.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "addendum": (
        "Usage: unit addendum [OPTIONS]\n"
        "\n"
        "  Append to a unit's task. Its executor is told to re-read the manifest.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --text TEXT             The addendum text (or --file).\n"
        "  --file FILE             A file holding the text (or --text).\n"
        "  --queue                 Append now; notify once no turn is in flight.\n"
        "  --restore-manifest      Rewrite a lost manifest from the record.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "scope": (
        "Usage: unit scope [OPTIONS]\n"
        "\n"
        "  What a unit changed against its base. Also what falls outside its --paths,\n"
        "  and who overlaps.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --approve               Record the scope approval.\n"
        "  --allow-outside         Approve files outside --paths.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "verify": (
        "Usage: unit verify [OPTIONS]\n"
        "\n"
        "  Run the unit's --validation on its HEAD and record the result.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --validation COMMAND    Supply the validation command again: it replaces the\n"
        "                          recorded one, signed by you (for a record whose\n"
        "                          command is not signed).\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --dry-run               Check and plan; change nothing.\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "wait": (
        "Usage: unit wait [OPTIONS]\n"
        "\n"
        "  Block until a unit gets a receipt or changes lifecycle. Git is not polled.\n"
        "\n"
        "Options:\n"
        "  --unit ID               A unit to wait for (repeatable; default: every\n"
        "                          unit).\n"
        "  --since ISO             Changes after this ISO time (default: now; pass\n"
        "                          observed_at).\n"
        "  --timeout-min MINUTES   Give up after this long.  [default: 30]\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "intake": (
        "Usage: unit intake [OPTIONS]\n"
        "\n"
        "  Free slots and the ready issues that may start. Each with its dependencies.\n"
        "\n"
        "Options:\n"
        "  --label LABEL           The ready-issue label. Required.\n"
        "  --milestone MILESTONE   Only issues of this milestone (title or number).\n"
        "  --max-active N          Refuse when this many units are active (default:\n"
        "                          config max_active, else 2).\n"
        "  --max-held N            Bounds the units held for review plus those still\n"
        "                          active: free slots = min(max_active - active,\n"
        "                          max_held - held - active) (default: config max_held,\n"
        "                          else 2).\n"
        "  --limit N               Read at most this many issues.  [default: 30]\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --format json|table     json (default) or table.  [default: json]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "merge": (
        "Usage: unit merge [OPTIONS]\n"
        "\n"
        "  Merge the unit's PR at --head when every gate passes. The merge hold is\n"
        "  enforced in code.\n"
        "\n"
        "Options:\n"
        "  --unit ID                     The unit id.  [required]\n"
        "  --head SHA                    The exact PR head commit to merge. Required.\n"
        "  --method merge|squash|rebase  How GitHub merges the PR.  [default: merge]\n"
        "  --repo PATH                   The repository (default: current directory).\n"
        "                                [default: .]\n"
        "  --lock-timeout SECONDS        Seconds to wait for locks (0 = do not wait).\n"
        "                                [default: 30]\n"
        "  --dry-run                     Check and plan; change nothing.\n"
        "  -h, --help                    Show this message and exit.\n"
    ),
    "watch": (
        "Usage: unit watch [OPTIONS]\n"
        "\n"
        "  A live view of every unit for a person. What needs attention comes first;\n"
        "  Ctrl-C ends.\n"
        "\n"
        "Options:\n"
        "  --interval SECONDS      Seconds between redraws.  [default: 3.0]\n"
        "  --once                  Draw one frame and exit.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "tail": (
        "Usage: unit tail [OPTIONS]\n"
        "\n"
        "  A turn's transcript for a person. --follow prints it until its receipt\n"
        "  lands.\n"
        "\n"
        "Options:\n"
        "  --unit ID               The unit id.  [required]\n"
        "  --seq N                 The turn (default: the one in flight, else the\n"
        "                          latest).\n"
        "  --follow                Keep printing until the turn's receipt lands.\n"
        "  --raw                   The transcript's (redacted) bytes, not rendered.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "serve": (
        "Usage: unit serve [OPTIONS]\n"
        "\n"
        "  A read-only web dashboard. What needs you, every unit, its transcript, live\n"
        "  in a browser.\n"
        "\n"
        "Options:\n"
        "  --host HOST             Address to listen on; off loopback it needs\n"
        "                          UNITMGR_SERVE_TOKEN.  [default: 127.0.0.1]\n"
        "  --port PORT             Port to listen on (0: any free port).  [default:\n"
        "                          8787]\n"
        "  --prs                   Also show each branch's PRs (read from GitHub).\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "config": (
        "Usage: unit config [OPTIONS]\n"
        "\n"
        "  The effective project settings. Each with its source: .unitmgr.toml, the\n"
        "  local config or the default. --approve lets a configured setup or\n"
        "  notify.command run.\n"
        "\n"
        "Options:\n"
        "  --approve            Approve the commands the config files now give: setup,\n"
        "                       validation, model, notify.command.\n"
        "  --dry-run            Check and plan; change nothing.\n"
        "  --repo PATH          The repository (default: current directory).  [default:\n"
        "                       .]\n"
        "  --format json|table  json (default) or table.  [default: json]\n"
        "  -h, --help           Show this message and exit.\n"
    ),
    "doctor": (
        "Usage: unit doctor [OPTIONS]\n"
        "\n"
        "  Audit what can make git run something. Every executable config key, hook and\n"
        "  attributes file, trusted or foreign, and how to remove it; --trust accepts\n"
        "  them.\n"
        "\n"
        "Options:\n"
        "  --trust      Accept the current git config, hooks and attributes as the\n"
        "               trusted baseline.\n"
        "  --repo PATH  The repository (default: current directory).  [default: .]\n"
        "  -h, --help   Show this message and exit.\n"
    ),
    "feedback": (
        "Usage: unit feedback [OPTIONS]\n"
        "\n"
        "  Send a unit its PR's failing CI and trusted review, once.\n"
        "\n"
        "Options:\n"
        "  --unit ID                   The unit (or --all).\n"
        "  --all                       Every recorded unit (or --unit).\n"
        "  --send                      Deliver the pending items as one addendum.\n"
        "  --queue                     With --send: append now; notify once no turn\n"
        "                              runs.\n"
        "  --auto                      With --send: only as the loop may (round caps;\n"
        "                              working, checks done).\n"
        "  --only ci|reviews|comments  Gather only this kind.\n"
        "  --max-bytes N               The addendum's bound in bytes.  [default: 16384]\n"
        "  --every SECONDS             Repeat every SECONDS (at least 120) until Ctrl-C\n"
        "                              or none is working.\n"
        "  --repo PATH                 The repository (default: current directory).\n"
        "                              [default: .]\n"
        "  --lock-timeout SECONDS      Seconds to wait for locks (0 = do not wait).\n"
        "                              [default: 30]\n"
        "  --dry-run                   Check and plan; change nothing.\n"
        "  -h, --help                  Show this message and exit.\n"
    ),
    "prune": (
        "Usage: unit prune [OPTIONS]\n"
        "\n"
        "  Remove old archives, never a recorded unit's.\n"
        "\n"
        "Options:\n"
        "  --older-than DURATION   Remove archives older than this: a number and s, m,\n"
        "                          h, d or w.  [default: 30d]\n"
        "  --dry-run               List what would go; remove nothing.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "log": (
        "Usage: unit log [OPTIONS]\n"
        "\n"
        "  The event log, one line per event; --follow for new ones.\n"
        "\n"
        "Options:\n"
        "  --unit ID               Only this unit's events.\n"
        "  --since ISO             Only events at or after this time.\n"
        "  --follow                Keep printing new events (one per line) until\n"
        "                          Ctrl-C.\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  --format json|table     json (default) or table.  [default: json]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "path": (
        "Usage: unit path [OPTIONS] {ID}\n"
        "\n"
        '  A unit\'s worktree path, and nothing else. For cd "$(unit path ID)".\n'
        "\n"
        "Arguments:\n"
        "  ID  The unit id.  [required]\n"
        "\n"
        "Options:\n"
        "  --repo PATH             The repository (default: current directory).\n"
        "                          [default: .]\n"
        "  --lock-timeout SECONDS  Seconds to wait for locks (0 = do not wait).\n"
        "                          [default: 30]\n"
        "  -h, --help              Show this message and exit.\n"
    ),
    "shell-init": (
        "Usage: unit shell-init [OPTIONS] {SHELL}\n"
        "\n"
        '  A `unit cd ID` shell function: eval "$(unit shell-init bash)".\n'
        "\n"
        "Arguments:\n"
        "  SHELL  bash, zsh or fish.  [required]\n"
        "\n"
        "Options:\n"
        "  --repo PATH  The repository (default: current directory).  [default: .]\n"
        "  -h, --help   Show this message and exit.\n"
    ),
}

# fmt: off
SPECS: dict[str, dict[str, object]] = {'create': {'options': {'--unit': ['unit', 'value'],
                        '--worktree': ['worktree', 'value'],
                        '--branch': ['branch', 'value'],
                        '--base': ['base', 'value'],
                        '--scope': ['scope', 'value'],
                        '--validation': ['validation', 'value'],
                        '--lead': ['lead', 'value'],
                        '--partner': ['partner', 'value'],
                        '--reason': ['reason', 'value'],
                        '--task': ['task', 'value'],
                        '--task-file': ['task_file', 'value'],
                        '--paths': ['paths', 'multiple'],
                        '--model': ['model', 'value'],
                        '--effort': ['effort', 'value'],
                        '--identity': ['identity', 'value'],
                        '--issue': ['issue', 'value'],
                        '--setup': ['setup', 'value'],
                        '--ports': ['ports', 'value'],
                        '--runner': ['runner', 'value'],
                        '--node': ['node', 'value'],
                        '--max-active': ['max_active', 'value'],
                        '--max-held': ['max_held', 'value'],
                        '--allow-overlap': ['allow_overlap', 'flag'],
                        '--repo': ['repo', 'value'],
                        '--lock-timeout': ['lock_timeout', 'value'],
                        '--dry-run': ['dry_run', 'flag']},
            'arguments': [],
            'defaults': {'unit': None,
                         'worktree': None,
                         'branch': None,
                         'base': None,
                         'scope': None,
                         'validation': None,
                         'lead': None,
                         'partner': None,
                         'reason': None,
                         'task': None,
                         'task_file': None,
                         'paths': [],
                         'model': None,
                         'effort': None,
                         'identity': None,
                         'issue': None,
                         'setup': None,
                         'ports': None,
                         'runner': None,
                         'node': None,
                         'max_active': None,
                         'max_held': None,
                         'allow_overlap': False,
                         'repo': '.',
                         'lock_timeout': '30',
                         'dry_run': False},
            'required': []},
 'list': {'options': {'--prs': ['prs', 'flag'],
                      '--repo': ['repo', 'value'],
                      '--lock-timeout': ['lock_timeout', 'value'],
                      '--format': ['output_format', 'value']},
          'arguments': [],
          'defaults': {'prs': False, 'repo': '.', 'lock_timeout': '30', 'output_format': 'json'},
          'required': []},
 'status': {'options': {'--unit': ['unit', 'value'],
                        '--all': ['all_units', 'flag'],
                        '--repo': ['repo', 'value'],
                        '--lock-timeout': ['lock_timeout', 'value'],
                        '--format': ['output_format', 'value']},
            'arguments': [],
            'defaults': {'unit': None,
                         'all_units': False,
                         'repo': '.',
                         'lock_timeout': '30',
                         'output_format': 'json'},
            'required': []},
 'dismantle': {'options': {'--unit': ['unit', 'value'],
                           '--force': ['force', 'value'],
                           '--repo': ['repo', 'value'],
                           '--lock-timeout': ['lock_timeout', 'value'],
                           '--dry-run': ['dry_run', 'flag']},
               'arguments': [],
               'defaults': {'force': None, 'repo': '.', 'lock_timeout': '30', 'dry_run': False},
               'required': ['unit']},
 'restaff': {'options': {'--unit': ['unit', 'value'],
                         '--lead': ['lead', 'value'],
                         '--partner': ['partner', 'value'],
                         '--reason': ['reason', 'value'],
                         '--model': ['model', 'value'],
                         '--effort': ['effort', 'value'],
                         '--identity': ['identity', 'value'],
                         '--runner': ['runner', 'value'],
                         '--node': ['node', 'value'],
                         '--repo': ['repo', 'value'],
                         '--lock-timeout': ['lock_timeout', 'value'],
                         '--dry-run': ['dry_run', 'flag']},
             'arguments': [],
             'defaults': {'lead': None,
                          'partner': None,
                          'reason': None,
                          'model': None,
                          'effort': None,
                          'identity': None,
                          'runner': None,
                          'node': None,
                          'repo': '.',
                          'lock_timeout': '30',
                          'dry_run': False},
             'required': ['unit']},
 'cancel': {'options': {'--unit': ['unit', 'value'],
                        '--reason': ['reason', 'value'],
                        '--repo': ['repo', 'value'],
                        '--lock-timeout': ['lock_timeout', 'value'],
                        '--dry-run': ['dry_run', 'flag']},
            'arguments': [],
            'defaults': {'reason': None, 'repo': '.', 'lock_timeout': '30', 'dry_run': False},
            'required': ['unit']},
 'addendum': {'options': {'--unit': ['unit', 'value'],
                          '--text': ['text', 'value'],
                          '--file': ['file', 'value'],
                          '--queue': ['queue', 'flag'],
                          '--restore-manifest': ['restore_manifest', 'flag'],
                          '--repo': ['repo', 'value'],
                          '--lock-timeout': ['lock_timeout', 'value'],
                          '--dry-run': ['dry_run', 'flag']},
              'arguments': [],
              'defaults': {'text': None,
                           'file': None,
                           'queue': False,
                           'restore_manifest': False,
                           'repo': '.',
                           'lock_timeout': '30',
                           'dry_run': False},
              'required': ['unit']},
 'scope': {'options': {'--unit': ['unit', 'value'],
                       '--approve': ['approve', 'flag'],
                       '--allow-outside': ['allow_outside', 'flag'],
                       '--repo': ['repo', 'value'],
                       '--lock-timeout': ['lock_timeout', 'value'],
                       '--dry-run': ['dry_run', 'flag']},
           'arguments': [],
           'defaults': {'approve': False,
                        'allow_outside': False,
                        'repo': '.',
                        'lock_timeout': '30',
                        'dry_run': False},
           'required': ['unit']},
 'verify': {'options': {'--unit': ['unit', 'value'],
                        '--validation': ['validation', 'value'],
                        '--repo': ['repo', 'value'],
                        '--lock-timeout': ['lock_timeout', 'value'],
                        '--dry-run': ['dry_run', 'flag']},
            'arguments': [],
            'defaults': {'validation': None, 'repo': '.', 'lock_timeout': '30', 'dry_run': False},
            'required': ['unit']},
 'wait': {'options': {'--unit': ['units', 'multiple'],
                      '--since': ['since', 'value'],
                      '--timeout-min': ['timeout_min', 'value'],
                      '--repo': ['repo', 'value'],
                      '--lock-timeout': ['lock_timeout', 'value']},
          'arguments': [],
          'defaults': {'units': [],
                       'since': None,
                       'timeout_min': '30',
                       'repo': '.',
                       'lock_timeout': '30'},
          'required': []},
 'intake': {'options': {'--label': ['label', 'value'],
                        '--milestone': ['milestone', 'value'],
                        '--max-active': ['max_active', 'value'],
                        '--max-held': ['max_held', 'value'],
                        '--limit': ['limit', 'value'],
                        '--repo': ['repo', 'value'],
                        '--lock-timeout': ['lock_timeout', 'value'],
                        '--format': ['output_format', 'value']},
            'arguments': [],
            'defaults': {'label': None,
                         'milestone': None,
                         'max_active': None,
                         'max_held': None,
                         'limit': '30',
                         'repo': '.',
                         'lock_timeout': '30',
                         'output_format': 'json'},
            'required': []},
 'merge': {'options': {'--unit': ['unit', 'value'],
                       '--head': ['head', 'value'],
                       '--method': ['method', 'value'],
                       '--repo': ['repo', 'value'],
                       '--lock-timeout': ['lock_timeout', 'value'],
                       '--dry-run': ['dry_run', 'flag']},
           'arguments': [],
           'defaults': {'head': None,
                        'method': 'merge',
                        'repo': '.',
                        'lock_timeout': '30',
                        'dry_run': False},
           'required': ['unit']},
 'watch': {'options': {'--interval': ['interval', 'float'],
                       '--once': ['once', 'flag'],
                       '--repo': ['repo', 'value'],
                       '--lock-timeout': ['lock_timeout', 'value']},
           'arguments': [],
           'defaults': {'interval': 3.0, 'once': False, 'repo': '.', 'lock_timeout': '30'},
           'required': []},
 'tail': {'options': {'--unit': ['unit', 'value'],
                      '--seq': ['seq', 'value'],
                      '--follow': ['follow', 'flag'],
                      '--raw': ['raw', 'flag'],
                      '--repo': ['repo', 'value'],
                      '--lock-timeout': ['lock_timeout', 'value']},
          'arguments': [],
          'defaults': {'seq': None,
                       'follow': False,
                       'raw': False,
                       'repo': '.',
                       'lock_timeout': '30'},
          'required': ['unit']},
 'serve': {'options': {'--host': ['host', 'value'],
                       '--port': ['port', 'int'],
                       '--prs': ['prs', 'flag'],
                       '--repo': ['repo', 'value'],
                       '--lock-timeout': ['lock_timeout', 'value']},
           'arguments': [],
           'defaults': {'host': '127.0.0.1',
                        'port': 8787,
                        'prs': False,
                        'repo': '.',
                        'lock_timeout': '30'},
           'required': []},
 'config': {'options': {'--approve': ['approve', 'flag'],
                        '--dry-run': ['dry_run', 'flag'],
                        '--repo': ['repo', 'value'],
                        '--format': ['output_format', 'value']},
            'arguments': [],
            'defaults': {'approve': False, 'dry_run': False, 'repo': '.', 'output_format': 'json'},
            'required': []},
 'doctor': {'options': {'--trust': ['trust', 'flag'], '--repo': ['repo', 'value']},
            'arguments': [],
            'defaults': {'trust': False, 'repo': '.'},
            'required': []},
 'feedback': {'options': {'--unit': ['unit', 'value'],
                          '--all': ['all', 'flag'],
                          '--send': ['send', 'flag'],
                          '--queue': ['queue', 'flag'],
                          '--auto': ['auto', 'flag'],
                          '--only': ['only', 'value'],
                          '--max-bytes': ['max_bytes', 'value'],
                          '--every': ['every', 'value'],
                          '--repo': ['repo', 'value'],
                          '--lock-timeout': ['lock_timeout', 'value'],
                          '--dry-run': ['dry_run', 'flag']},
              'arguments': [],
              'defaults': {'unit': None,
                           'all': False,
                           'send': False,
                           'queue': False,
                           'auto': False,
                           'only': None,
                           'max_bytes': '16384',
                           'every': None,
                           'repo': '.',
                           'lock_timeout': '30',
                           'dry_run': False},
              'required': []},
 'prune': {'options': {'--older-than': ['older_than', 'value'],
                       '--dry-run': ['dry_run', 'flag'],
                       '--repo': ['repo', 'value'],
                       '--lock-timeout': ['lock_timeout', 'value']},
           'arguments': [],
           'defaults': {'older_than': '30d', 'dry_run': False, 'repo': '.', 'lock_timeout': '30'},
           'required': []},
 'log': {'options': {'--unit': ['unit', 'value'],
                     '--since': ['since', 'value'],
                     '--follow': ['follow', 'flag'],
                     '--repo': ['repo', 'value'],
                     '--lock-timeout': ['lock_timeout', 'value'],
                     '--format': ['output_format', 'value']},
         'arguments': [],
         'defaults': {'unit': None,
                      'since': None,
                      'follow': False,
                      'repo': '.',
                      'lock_timeout': '30',
                      'output_format': 'json'},
         'required': []},
 'path': {'options': {'--repo': ['repo', 'value'], '--lock-timeout': ['lock_timeout', 'value']},
          'arguments': ['unit'],
          'defaults': {'repo': '.', 'lock_timeout': '30'},
          'required': []},
 'shell-init': {'options': {'--repo': ['repo', 'value']},
                'arguments': ['shell'],
                'defaults': {'repo': '.'},
                'required': []}}
# fmt: on
