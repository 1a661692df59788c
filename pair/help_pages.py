"""The `pair --help` pages and command specs, from the Typer app. GENERATED.

Written by `python -m pair.help_text --write` (do not edit by hand); pair/entry.py
prints the pages and parses plain command lines by the specs (registry/plain_argv.py) without
importing Typer, and the tests fail when they are stale. Typer caps its help at 80 columns, so a
page is exact on any terminal at least that wide; a narrower one gets Typer's own rendering.
"""

WIDTH = 80

PAGES: dict[str, str] = {
    "": (
        "Usage: pair [OPTIONS] COMMAND [ARGS]...\n"
        "\n"
        "  Run and supervise headless executor turns in one worktree.\n"
        "\n"
        "Options:\n"
        "  --version             Print the version and exit.\n"
        "  --install-completion  Install completion for the current shell.\n"
        "  --show-completion     Show completion for the current shell, to copy it or\n"
        "                        customize the installation.\n"
        "  -h, --help            Show this message and exit.\n"
        "\n"
        "Commands:\n"
        "  init     Create (or resume) the pair session of this worktree.\n"
        "  resolve  Resolve a model request for a partner, without a session.\n"
        "  send     Send one turn and print its receipt.\n"
        "  wait     Wait for a turn's receipt (default: the latest turn).\n"
        "  status   Session fields, seq, the in-flight turn and the latest receipt.\n"
        "  cancel   Stop the in-flight turn and its whole process tree.\n"
        "  clear    Remove a dead turn's in-flight marker.\n"
        "  end      End the session; its files move to ended/.\n"
    ),
    "init": (
        "Usage: pair init [OPTIONS]\n"
        "\n"
        "  Create (or resume) the pair session of this worktree.\n"
        "\n"
        "Options:\n"
        "  --partner PARTNER     The partner's CLI. One of\n"
        "                        claude|codex|cursor|opencode|grok|script.  [required]\n"
        "  --repo PATH           The worktree (default: current directory).  [default:\n"
        "                        .]\n"
        "  --lead LEAD           Who drives the pair (default: detected, else lead).\n"
        "  --identity NAME       The partner's login (default: default).\n"
        "  --model MODEL         An id, an alias, CLI-default or latest:<family>.\n"
        "  --effort EFFORT       Reasoning effort (the partner's levels).\n"
        "  --role peer|executor  executor: turns write by default; peer: they only\n"
        "                        read.  [default: peer]\n"
        "  --idle-min MINUTES    The bootstrap's idle budget.\n"
        "  --total-min MINUTES   The bootstrap's total budget.\n"
        "  --runner local|ray    Where turns run: local (default) or ray.\n"
        "  --node NAME           The Ray node (its unitmgr-node-NAME resource).\n"
        "  --ray-address ADDR    The cluster: ray://HOST:10001, HOST:6379, auto.\n"
        "  -h, --help            Show this message and exit.\n"
    ),
    "resolve": (
        "Usage: pair resolve [OPTIONS]\n"
        "\n"
        "  Resolve a model request for a partner, without a session.\n"
        "\n"
        "Options:\n"
        "  --partner PARTNER  The partner's CLI. One of\n"
        "                     claude|codex|cursor|opencode|grok|script.  [required]\n"
        "  --model MODEL      An id, an alias, CLI-default or latest:<family>.\n"
        "                     [required]\n"
        "  --effort EFFORT    Reasoning effort (the partner's levels).\n"
        "  --identity NAME    The partner's login (default: default).\n"
        "  -h, --help         Show this message and exit.\n"
    ),
    "send": (
        "Usage: pair send [OPTIONS]\n"
        "\n"
        "  Send one turn and print its receipt. With --background: the running record.\n"
        "\n"
        "Options:\n"
        "  --kind KIND          One of task, review, question, ready, accepted,\n"
        "                       blocked, stalemate, handoff.  [required]\n"
        "  --body-file FILE     The turn's prompt body, a file.  [required]\n"
        "  --repo PATH          The worktree (default: current directory).  [default:\n"
        "                       .]\n"
        "  --lead LEAD          Who drives the pair (default: detected, else lead).\n"
        "  --write              The turn may write (default: by the role).\n"
        "  --read-only          The turn may only read (default: by the role).\n"
        "  --background         Return once the partner started, not its receipt.\n"
        "  --idle-min MINUTES   Kill the turn after this long without output (default:\n"
        "                       45 for a writable task, else 20).\n"
        "  --total-min MINUTES  Kill the turn after this long in all (default: 120 for\n"
        "                       a writable task, else 60).\n"
        "  -h, --help           Show this message and exit.\n"
    ),
    "wait": (
        "Usage: pair wait [OPTIONS]\n"
        "\n"
        "  Wait for a turn's receipt (default: the latest turn).\n"
        "\n"
        "Options:\n"
        "  --repo PATH            The worktree (default: current directory).  [default:\n"
        "                         .]\n"
        "  --seq N                The turn to wait for (default: the latest).\n"
        "  --timeout-min MINUTES  Give up after this long (wait-timeout).\n"
        "  -h, --help             Show this message and exit.\n"
    ),
    "status": (
        "Usage: pair status [OPTIONS]\n"
        "\n"
        "  Session fields, seq, the in-flight turn and the latest receipt.\n"
        "\n"
        "Options:\n"
        "  --repo PATH  The worktree (default: current directory).  [default: .]\n"
        "  -h, --help   Show this message and exit.\n"
    ),
    "cancel": (
        "Usage: pair cancel [OPTIONS]\n"
        "\n"
        "  Stop the in-flight turn and its whole process tree. Its receipt says\n"
        "  cancelled.\n"
        "\n"
        "Options:\n"
        "  --repo PATH    The worktree (default: current directory).  [default: .]\n"
        "  --seq N        The turn to cancel (default: the one in flight).\n"
        "  --reason TEXT  Why; recorded in the receipt.\n"
        "  -h, --help     Show this message and exit.\n"
    ),
    "clear": (
        "Usage: pair clear [OPTIONS]\n"
        "\n"
        "  Remove a dead turn's in-flight marker. Refused while any of its processes\n"
        "  live.\n"
        "\n"
        "Options:\n"
        "  --repo PATH  The worktree (default: current directory).  [default: .]\n"
        "  -h, --help   Show this message and exit.\n"
    ),
    "end": (
        "Usage: pair end [OPTIONS]\n"
        "\n"
        "  End the session; its files move to ended/. Refused while a turn is in\n"
        "  flight.\n"
        "\n"
        "Options:\n"
        "  --repo PATH  The worktree (default: current directory).  [default: .]\n"
        "  -h, --help   Show this message and exit.\n"
    ),
}

# fmt: off
SPECS: dict[str, dict[str, object]] = {'init': {'options': {'--partner': ['partner', 'value'],
                      '--repo': ['repo', 'value'],
                      '--lead': ['lead', 'value'],
                      '--identity': ['identity', 'value'],
                      '--model': ['model', 'value'],
                      '--effort': ['effort', 'value'],
                      '--role': ['role', 'value'],
                      '--idle-min': ['idle_min', 'value'],
                      '--total-min': ['total_min', 'value'],
                      '--runner': ['runner', 'value'],
                      '--node': ['node', 'value'],
                      '--ray-address': ['ray_address', 'value']},
          'arguments': [],
          'defaults': {'repo': '.',
                       'lead': None,
                       'identity': None,
                       'model': None,
                       'effort': None,
                       'role': 'peer',
                       'idle_min': None,
                       'total_min': None,
                       'runner': None,
                       'node': None,
                       'ray_address': None},
          'required': ['partner']},
 'resolve': {'options': {'--partner': ['partner', 'value'],
                         '--model': ['model', 'value'],
                         '--effort': ['effort', 'value'],
                         '--identity': ['identity', 'value']},
             'arguments': [],
             'defaults': {'effort': None, 'identity': None},
             'required': ['partner', 'model']},
 'send': {'options': {'--kind': ['kind', 'value'],
                      '--body-file': ['body_file', 'value'],
                      '--repo': ['repo', 'value'],
                      '--lead': ['lead', 'value'],
                      '--write': ['write', 'flag'],
                      '--read-only': ['read_only', 'flag'],
                      '--background': ['background', 'flag'],
                      '--idle-min': ['idle_min', 'value'],
                      '--total-min': ['total_min', 'value']},
          'arguments': [],
          'defaults': {'repo': '.',
                       'lead': None,
                       'write': False,
                       'read_only': False,
                       'background': False,
                       'idle_min': None,
                       'total_min': None},
          'required': ['kind', 'body_file']},
 'wait': {'options': {'--repo': ['repo', 'value'],
                      '--seq': ['seq', 'int'],
                      '--timeout-min': ['timeout_min', 'value']},
          'arguments': [],
          'defaults': {'repo': '.', 'seq': None, 'timeout_min': None},
          'required': []},
 'status': {'options': {'--repo': ['repo', 'value']},
            'arguments': [],
            'defaults': {'repo': '.'},
            'required': []},
 'cancel': {'options': {'--repo': ['repo', 'value'],
                        '--seq': ['seq', 'int'],
                        '--reason': ['reason', 'value']},
            'arguments': [],
            'defaults': {'repo': '.', 'seq': None, 'reason': None},
            'required': []},
 'clear': {'options': {'--repo': ['repo', 'value']},
           'arguments': [],
           'defaults': {'repo': '.'},
           'required': []},
 'end': {'options': {'--repo': ['repo', 'value']},
         'arguments': [],
         'defaults': {'repo': '.'},
         'required': []}}
# fmt: on
