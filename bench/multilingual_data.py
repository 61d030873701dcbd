"""The multilingual bench's data, written by hand for it (bench.multilingual).

FACTS: per language, eight memories of one user as an extractor would store them, each
with a question a chat app's user might ask in that language, sharing some but not all
of the fact's words. PAIRS: per language, paraphrases that dedup must merge (True) and
near pairs of one sentence frame and another fact that it must not (False); the last
ones pair one fact in two languages (False: keywords do not cross languages).
"""

from __future__ import annotations

# language → [(fact, question)]
FACTS: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("User drinks green tea every morning.", "What does the user drink in the morning?"),
        ("User's sister lives in Toronto.", "Where does the user's sister live?"),
        ("User is allergic to peanuts.", "Which food allergy does the user have?"),
        ("User plays the cello in an amateur orchestra.", "Which instrument does the user play?"),
        (
            "User's daughter starts school in September.",
            "When does the user's daughter start school?",
        ),
        ("User works as a nurse at the city hospital.", "What is the user's job?"),
        (
            "User prefers trains over planes for short trips.",
            "How does the user like to travel on short trips?",
        ),
        ("User is training for a marathon in April.", "Which race is the user training for?"),
    ],
    "de": [
        ("Der Nutzer trinkt jeden Morgen grünen Tee.", "Was trinkt der Nutzer am Morgen?"),
        ("Die Schwester des Nutzers wohnt in Hamburg.", "Wo wohnt die Schwester des Nutzers?"),
        (
            "Der Nutzer ist allergisch gegen Erdnüsse.",
            "Gegen welche Lebensmittel ist der Nutzer allergisch?",
        ),
        (
            "Der Nutzer spielt Cello in einem Laienorchester.",
            "Welches Instrument spielt der Nutzer?",
        ),
        (
            "Die Tochter des Nutzers kommt im September in die Schule.",
            "Wann kommt die Tochter des Nutzers in die Schule?",
        ),
        (
            "Der Nutzer arbeitet als Krankenpfleger im Stadtkrankenhaus.",
            "Als was arbeitet der Nutzer?",
        ),
        (
            "Der Nutzer fährt auf kurzen Strecken lieber Zug als zu fliegen.",
            "Wie reist der Nutzer auf kurzen Strecken?",
        ),
        (
            "Der Nutzer trainiert für einen Marathon im April.",
            "Für welchen Lauf trainiert der Nutzer?",
        ),
    ],
    "fr": [
        ("L'utilisateur boit du thé vert chaque matin.", "Que boit l'utilisateur le matin ?"),
        ("La sœur de l'utilisateur habite à Lyon.", "Où habite la sœur de l'utilisateur ?"),
        ("L'utilisateur est allergique aux arachides.", "À quoi l'utilisateur est-il allergique ?"),
        (
            "L'utilisateur joue du violoncelle dans un orchestre amateur.",
            "De quel instrument joue l'utilisateur ?",
        ),
        (
            "La fille de l'utilisateur entre à l'école en septembre.",
            "Quand la fille de l'utilisateur entre-t-elle à l'école ?",
        ),
        (
            "L'utilisateur travaille comme infirmier à l'hôpital municipal.",
            "Quel est le métier de l'utilisateur ?",
        ),
        (
            "L'utilisateur préfère le train à l'avion pour les courts trajets.",
            "Comment l'utilisateur voyage-t-il pour les courts trajets ?",
        ),
        (
            "L'utilisateur s'entraîne pour un marathon en avril.",
            "Pour quelle course l'utilisateur s'entraîne-t-il ?",
        ),
    ],
    "es": [
        ("El usuario toma té verde todas las mañanas.", "¿Qué toma el usuario por la mañana?"),
        ("La hermana del usuario vive en Sevilla.", "¿Dónde vive la hermana del usuario?"),
        ("El usuario es alérgico a los cacahuetes.", "¿A qué alimento es alérgico el usuario?"),
        (
            "El usuario toca el violonchelo en una orquesta de aficionados.",
            "¿Qué instrumento toca el usuario?",
        ),
        (
            "La hija del usuario empieza el colegio en septiembre.",
            "¿Cuándo empieza el colegio la hija del usuario?",
        ),
        (
            "El usuario trabaja como enfermero en el hospital municipal.",
            "¿En qué trabaja el usuario?",
        ),
        (
            "El usuario prefiere el tren al avión para viajes cortos.",
            "¿Cómo prefiere viajar el usuario en viajes cortos?",
        ),
        ("El usuario entrena para un maratón en abril.", "¿Para qué carrera entrena el usuario?"),
    ],
    "pt": [
        ("O usuário bebe chá verde todas as manhãs.", "O que o usuário bebe de manhã?"),
        ("A irmã do usuário mora em Recife.", "Onde mora a irmã do usuário?"),
        ("O usuário é alérgico a amendoim.", "O usuário tem alergia a qual alimento?"),
        ("O usuário toca violoncelo numa orquestra amadora.", "Que instrumento o usuário toca?"),
        (
            "A filha do usuário começa a escola em setembro.",
            "Quando a filha do usuário começa a escola?",
        ),
        (
            "O usuário trabalha como enfermeiro no hospital municipal.",
            "Qual é o trabalho do usuário?",
        ),
        (
            "O usuário prefere trem a avião em viagens curtas.",
            "Como o usuário prefere fazer viagens curtas?",
        ),
        (
            "O usuário está treinando para uma maratona em abril.",
            "Para qual corrida o usuário está treinando?",
        ),
    ],
    "zh": [
        ("用户每天早上喝绿茶。", "用户早上喝什么？"),
        ("用户的姐姐住在杭州。", "用户的姐姐住在哪里？"),
        ("用户对花生过敏。", "用户对什么食物过敏？"),
        ("用户在一个业余乐团拉大提琴。", "用户演奏什么乐器？"),
        ("用户的女儿九月开始上小学。", "用户的女儿什么时候上小学？"),
        ("用户在市医院当护士。", "用户的工作是什么？"),
        ("短途旅行时用户更喜欢坐火车而不是坐飞机。", "短途旅行用户喜欢怎么出行？"),
        ("用户正在为四月的马拉松做训练。", "用户在为哪场比赛训练？"),
    ],
    "ja": [
        ("ユーザーは毎朝緑茶を飲みます。", "ユーザーは朝に何を飲みますか？"),
        ("ユーザーの姉は札幌に住んでいます。", "ユーザーの姉はどこに住んでいますか？"),
        ("ユーザーはピーナッツアレルギーです。", "ユーザーは何のアレルギーがありますか？"),
        (
            "ユーザーはアマチュアオーケストラでチェロを弾いています。",
            "ユーザーは何の楽器を弾きますか？",
        ),
        ("ユーザーの娘は九月に小学校に入学します。", "ユーザーの娘はいつ小学校に入学しますか？"),
        ("ユーザーは市立病院で看護師として働いています。", "ユーザーの仕事は何ですか？"),
        (
            "ユーザーは短い旅行では飛行機より電車が好きです。",
            "ユーザーは短い旅行で何を使いますか？",
        ),
        (
            "ユーザーは四月のマラソンに向けてトレーニングしています。",
            "ユーザーはどの大会に向けてトレーニングしていますか？",
        ),
    ],
}

# (a, b, same fact?)
PAIRS: list[tuple[str, str, bool]] = [
    ("User drinks green tea every morning.", "Every morning, the user drinks green tea.", True),
    (
        "User works as a nurse at the city hospital.",
        "User works at the city hospital as a nurse.",
        True,
    ),
    ("User drinks green tea every morning.", "User drinks black coffee every evening.", False),
    ("User plays the cello in an orchestra.", "User plays the piano in a band.", False),
    ("Ich trinke jeden Morgen grünen Tee.", "Jeden Morgen trinke ich grünen Tee.", True),
    (
        "Der Nutzer arbeitet als Krankenpfleger im Stadtkrankenhaus.",
        "Der Nutzer arbeitet im Stadtkrankenhaus als Krankenpfleger.",
        True,
    ),
    (
        "Der Nutzer trinkt jeden Morgen grünen Tee.",
        "Der Nutzer trinkt jeden Abend schwarzen Kaffee.",
        False,
    ),
    (
        "Der Nutzer spielt Cello in einem Orchester.",
        "Der Nutzer spielt Klavier in einer Band.",
        False,
    ),
    (
        "L'utilisateur boit du thé vert chaque matin.",
        "Chaque matin, l'utilisateur boit du thé vert.",
        True,
    ),
    (
        "L'utilisateur travaille comme infirmier à l'hôpital municipal.",
        "L'utilisateur travaille à l'hôpital municipal comme infirmier.",
        True,
    ),
    (
        "L'utilisateur boit du thé vert chaque matin.",
        "L'utilisateur boit du café noir chaque soir.",
        False,
    ),
    (
        "L'utilisateur joue du violoncelle dans un orchestre.",
        "L'utilisateur joue du piano dans un groupe.",
        False,
    ),
    (
        "El usuario toma té verde todas las mañanas.",
        "Todas las mañanas el usuario toma té verde.",
        True,
    ),
    (
        "El usuario trabaja como enfermero en el hospital municipal.",
        "El usuario trabaja en el hospital municipal como enfermero.",
        True,
    ),
    (
        "El usuario toma té verde todas las mañanas.",
        "El usuario toma café solo todas las noches.",
        False,
    ),
    (
        "El usuario toca el violonchelo en una orquesta.",
        "El usuario toca el piano en un grupo.",
        False,
    ),
    (
        "O usuário bebe chá verde todas as manhãs.",
        "Todas as manhãs o usuário bebe chá verde.",
        True,
    ),
    (
        "O usuário trabalha como enfermeiro no hospital municipal.",
        "O usuário trabalha no hospital municipal como enfermeiro.",
        True,
    ),
    (
        "O usuário bebe chá verde todas as manhãs.",
        "O usuário bebe café preto todas as noites.",
        False,
    ),
    ("O usuário toca violoncelo numa orquestra.", "O usuário toca piano numa banda.", False),
    ("L'utente beve tè verde ogni mattina.", "Ogni mattina l'utente beve tè verde.", True),
    ("L'utente beve tè verde ogni mattina.", "L'utente beve caffè nero ogni sera.", False),
    (
        "De gebruiker drinkt elke ochtend groene thee.",
        "Elke ochtend drinkt de gebruiker groene thee.",
        True,
    ),
    (
        "De gebruiker drinkt elke ochtend groene thee.",
        "De gebruiker drinkt elke avond zwarte koffie.",
        False,
    ),
    ("用户每天早上喝绿茶。", "每天早上用户都喝绿茶。", True),
    ("用户在市医院当护士。", "用户在市医院工作，当护士。", True),
    ("用户每天早上喝绿茶。", "用户每天晚上喝红酒。", False),
    ("用户在乐团拉大提琴。", "用户在乐队弹钢琴。", False),
    ("ユーザーは毎朝緑茶を飲みます。", "毎朝、ユーザーは緑茶を飲んでいます。", True),
    (
        "ユーザーは市立病院で看護師として働いています。",
        "ユーザーは看護師として市立病院で働いています。",
        True,
    ),
    ("ユーザーは毎朝緑茶を飲みます。", "ユーザーは毎晩ビールを飲みます。", False),
    ("ユーザーはオーケストラでチェロを弾きます。", "ユーザーはバンドでピアノを弾きます。", False),
    ("User drinks green tea every morning.", "Der Nutzer trinkt jeden Morgen grünen Tee.", False),
    ("User programs in Python and Rust.", "Der Nutzer programmiert in Python und Rust.", False),
    ("User programs in Python and Rust.", "El usuario programa en Python y Rust.", False),
]
